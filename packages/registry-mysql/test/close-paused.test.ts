// Closing while the MariaDB server is SIGSTOPped with a renewal or a timestamp report in flight
// (`registryClosePausedConformance` of @leaf/conformance, in both modes): the release, the
// SnowflakeWorker's close and the registry's close end while the server is still stopped (the
// registry's statements have a time limit; the pool's end must not wait for a statement the server
// never answers), a release that got no answer is not reported as done, and a worker started once
// the server runs again issues no id the first one issued.
import { mkdtemp } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { registryClosePausedConformance } from "@leaf/conformance/registry";
import { layouts } from "@leaf/core";
import { type MysqlHandle, settlesWhilePaused, startMysql, stopAll } from "@leaf/testkit";
import { afterAll, beforeAll, describe, test } from "vitest";
import { createSchema, MysqlRegistry } from "../src/index";
import { ONE_WORKER } from "./one-worker";

/** How long the server stays stopped while the close runs: far past every timeout below (2 s). */
const PAUSED_MS = 30_000;
/** Statements time out after 2 s; a lease lasts 10 s, renewed every 500 ms. */
const TIMINGS = {
  leaseMs: 10_000,
  safetyMarginMs: 2_000,
  renewIntervalMs: 500,
  queryTimeoutMs: 2_000,
};

let mysql: MysqlHandle;
let db: string;
let cacheRoot: string;

beforeAll(async () => {
  mysql = await startMysql({ useEnv: false });
  db = await mysql.createDatabase("leaf_close_paused");
  await createSchema(mysql.urlFor(db), { mode: "lease" });
  await createSchema(mysql.urlFor(db), { mode: "fixed" });
  cacheRoot = await mkdtemp(join(tmpdir(), "leaf-close-paused-"));
}, 120_000);

afterAll(async () => {
  if (mysql?.running) mysql.resume();
  await stopAll();
});

describe("MysqlRegistry while MariaDB is SIGSTOPped", () => {
  // Lease mode on the one-worker layout (the next worker of the service can only get the same
  // id); fixed mode on Leaf's (its id is its ip:port's row).
  registryClosePausedConformance(test, {
    name: "lease mode",
    create: () => new MysqlRegistry({ mode: "lease", url: mysql.urlFor(db), ...TIMINGS }),
    node: (service, index) => ({ name: service, ip: `10.7.0.${index + 1}`, port: 8080 }),
    layout: ONE_WORKER,
    pause: () => mysql.pause(),
    settleWhilePaused: (promise) => settlesWhilePaused(mysql, promise, PAUSED_MS),
  });
  registryClosePausedConformance(test, {
    name: "fixed mode",
    create: () =>
      new MysqlRegistry({
        mode: "fixed",
        url: mysql.urlFor(db),
        queryTimeoutMs: TIMINGS.queryTimeoutMs,
        cacheDir: join(cacheRoot, "cache"),
      }),
    node: (service, index) => ({ name: service, ip: `10.7.0.${index + 1}`, port: 8080 }),
    layout: layouts.leaf,
    pause: () => mysql.pause(),
    settleWhilePaused: (promise) => settlesWhilePaused(mysql, promise, PAUSED_MS),
  });
});
