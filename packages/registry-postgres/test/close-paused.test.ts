// Closing while the PostgreSQL server is SIGSTOPped with a renewal or a timestamp report in flight
// (`registryClosePausedConformance` of @leaf/conformance, as registry-mysql runs it against
// MariaDB): the release, the SnowflakeWorker's close and the registry's close end while the server
// is still stopped (every statement and connection attempt has a time limit, and a connection that
// timed out is destroyed), a release that got no answer is not reported as done, and a worker
// started once the server runs again issues no id the first one issued.
import { registryClosePausedConformance } from "@leaf/conformance/registry";
import { type PostgresHandle, settlesWhilePaused, startPostgres, stopAll } from "@leaf/testkit";
import { afterAll, beforeAll, describe, test } from "vitest";
import { createSchema, PostgresRegistry } from "../src/index";
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

let postgres: PostgresHandle;
let db: string;

beforeAll(async () => {
  postgres = await startPostgres({ useEnv: false });
  db = await postgres.createDatabase("leaf_close_paused");
  await createSchema(postgres.urlFor(db));
}, 120_000);

afterAll(async () => {
  if (postgres?.running) postgres.resume();
  await stopAll();
});

describe("PostgresRegistry while PostgreSQL is SIGSTOPped", () => {
  // On the one-worker layout: the next worker of the service can only get the same id.
  registryClosePausedConformance(test, {
    name: "registry-postgres",
    create: () => new PostgresRegistry({ url: postgres.urlFor(db), ...TIMINGS }),
    node: (service, index) => ({ name: service, ip: `10.8.0.${index + 1}`, port: 8080 }),
    layout: ONE_WORKER,
    pause: () => postgres.pause(),
    settleWhilePaused: (promise) => settlesWhilePaused(postgres, promise, PAUSED_MS),
  });
});
