// A server stopped (SIGTERM) while its database is SIGSTOPped, with the MySQL registry (MariaDB) or
// the PostgreSQL registry holding its worker id and a timestamp report (a lease renewal) in flight:
// the process exits while the database is still stopped (every close is bounded by the registry's
// and the store's timeouts), and says the release was not made rather than claiming it. A server
// started once the database runs again issues no id the first one issued.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  countDuplicates,
  freePort,
  type LeafServerProcess,
  type MysqlHandle,
  type PostgresHandle,
  settlesWhilePaused,
  startMysql,
  startPostgres,
  stopAll,
} from "@leaf/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Load, serverProcess, sleep, until } from "./fault-servers";

/** How long the database stays stopped after SIGTERM: far past the registry's timeouts (3-5 s). */
const PAUSED_MS = 30_000;
/** Single snowflake ids. */
const PATH = "/api/snowflake/get/stop";

const dirs: string[] = [];
let mysql: MysqlHandle;
let postgres: PostgresHandle;

beforeAll(async () => {
  mysql = await startMysql({ useEnv: false });
  postgres = await startPostgres({ useEnv: false });
}, 180_000);

afterAll(async () => {
  if (mysql?.running) mysql.resume();
  if (postgres?.running) postgres.resume();
  await postgres?.dispose();
  await stopAll();
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

/**
 * The configuration of a server with the MySQL registry in `mode`; fixed mode shares its database
 * with the segment store (Java Leaf's leaf.jdbc.url), lease mode has the registry alone.
 */
async function configOf(mode: "fixed" | "lease"): Promise<Record<string, unknown>> {
  const url = mysql.urlFor(await mysql.createDatabase(`leaf_stop_${mode}`));
  return {
    name: `stop-${mode}`,
    snowflake: {
      enabled: true,
      ip: "127.0.0.1",
      registry: "mysql",
      mysql: { url, password: "", mode, createTable: true },
    },
    segment:
      mode === "fixed"
        ? { enabled: true, mysql: { url, password: "", createTable: true } }
        : { enabled: false },
  };
}

/** The PostgreSQL registry's configuration (segment mode off), its lease the default 60 s. */
async function postgresConfig(): Promise<Record<string, unknown>> {
  const url = postgres.urlFor(await postgres.createDatabase("leaf_stop_postgres"));
  return {
    name: "stop-postgres",
    snowflake: {
      enabled: true,
      ip: "127.0.0.1",
      registry: "postgres",
      postgres: { url, password: "", createTable: true },
    },
    segment: { enabled: false },
  };
}

/** The exit code and how long after SIGTERM it came; `database` is resumed after PAUSED_MS. */
async function stopWhilePaused(database: { resume(): void }, server: LeafServerProcess) {
  const { whilePaused, result, settledAfterMs } = await settlesWhilePaused(
    database,
    server.stop(),
    PAUSED_MS,
  );
  if (result.status === "rejected") throw result.reason;
  return { whilePaused, exit: result.value, settledAfterMs };
}

const cases = [
  { name: "the MySQL registry in lease mode", db: () => mysql, config: () => configOf("lease") },
  { name: "the MySQL registry in fixed mode", db: () => mysql, config: () => configOf("fixed") },
  { name: "the PostgreSQL registry", db: () => postgres, config: postgresConfig },
];

describe.each(cases)("a server with $name", ({ name, db, config: makeConfig }) => {
  it("stops on SIGTERM while its database is SIGSTOPped with a report in flight; the next server issues no id twice", async () => {
    const dir = mkdtempSync(join(tmpdir(), "leaf-stop-paused-"));
    dirs.push(dir);
    const config = await makeConfig();
    const port = await freePort();
    // Far past PAUSED_MS: a stop that waits for the database is seen as such, not killed.
    const first = serverProcess("A", dir, port, config, undefined, 120_000);
    await first.start();
    const load = new Load(port, PATH, 2, 8);
    await until("ids answered", () => load.ids >= 2_000);
    db().pause();
    // Reports (and the lease registries' renewals) come every 3 s: one is waiting for the
    // database.
    await sleep(3_500);
    await load.stop();
    const { whilePaused, exit, settledAfterMs } = await stopWhilePaused(db(), first);
    console.log(
      `${name}: exit ${JSON.stringify(exit)} ${settledAfterMs} ms after SIGTERM; output:\n${first.output.slice(-600)}`,
    );
    expect(whilePaused).toBe(true);
    expect(exit.signal).toBeNull();
    // The release got no answer: the stop is reported as failed, not as a lease released.
    expect(exit.code).toBe(1);
    expect(first.output).toContain("shutdown failed");
    // The database runs again: a server on the same ip:port (fixed mode: the same row's id; a
    // lease: whichever id it is granted) issues nothing the first issued.
    const second = serverProcess("B", dir, port, config);
    await until("the second server started", async () => (await second.tryStart()).started, 90_000);
    const after = new Load(port, PATH, 2, 8);
    try {
      await until("ids answered by the second server", () => after.ids >= 2_000);
    } finally {
      await after.stop();
      await second.stop();
    }
    const count = countDuplicates([...load.batches, ...after.batches]);
    console.log(`${name}: ${count.total} ids, ${count.duplicates} twice`);
    expect(count.duplicates).toBe(0);
  }, 300_000);
});
