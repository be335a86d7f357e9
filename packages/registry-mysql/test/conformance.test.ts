// The published conformance suite, unchanged, against both modes of MysqlRegistry on a real
// MariaDB.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { registryConformance } from "@leaf/conformance/registry";
import { type MysqlHandle, startMysql, stopAll } from "@leaf/testkit";
import { type Connection, createConnection, type RowDataPacket } from "mysql2/promise";
import { afterAll, beforeAll, test } from "vitest";
import { createSchema, type FixedLease, type LeasedLease, MysqlRegistry } from "../src/index";

let mysql: MysqlHandle;
let leaseDb: string;
const cacheDir = mkdtempSync(join(tmpdir(), "leaf-mysql-conformance-"));
const intruders: Connection[] = [];

beforeAll(async () => {
  mysql = await startMysql();
  leaseDb = await mysql.createDatabase("leaf_conf_lease");
  await createSchema(mysql.urlFor(leaseDb), { mode: "lease" });
});

afterAll(async () => {
  for (const connection of intruders) await connection.end().catch(() => {});
  await stopAll();
  rmSync(cacheDir, { recursive: true, force: true });
});

// Fixed mode has one table per service (the fork's table has no service column): one database per
// namespace, created on first use.
const fixedDbs = new Map<string, Promise<string>>();
function fixedDb(namespace: string): Promise<string> {
  let db = fixedDbs.get(namespace);
  if (!db) {
    db = mysql.createDatabase("leaf_conf_fixed").then(async (name) => {
      await createSchema(mysql.urlFor(name), { mode: "fixed" });
      return name;
    });
    fixedDbs.set(namespace, db);
  }
  return db;
}

registryConformance(test, {
  name: "registry-mysql (fixed mode)",
  create: async ({ namespace }) =>
    new MysqlRegistry({
      mode: "fixed",
      url: mysql.urlFor(await fixedDb(namespace)),
      cacheDir,
    }),
  // Worker id = AUTO_INCREMENT row id, which starts at 1: ids 1..max fit, so max nodes, not max+1.
  exhaustion: { maxWorkerId: 3, capacity: 3 },
  backups: { unsupported: "the fork's table gives each ip:port exactly one worker id" },
  leaseLoss: {
    // Another session takes the worker id's named lock after the holder's lock session dies: the
    // holder's next report reconnects, finds the lock taken and loses the lease.
    induce: async (lease, { namespace }) => {
      const name = (lease as FixedLease).lockName!;
      const intruder = await createConnection(mysql.connectionOptions(await fixedDb(namespace)));
      intruders.push(intruder);
      const [[row]] = await intruder.query<RowDataPacket[]>("SELECT IS_USED_LOCK(?) AS id", [name]);
      await intruder.query(`KILL CONNECTION ${Number(row!.id)}`);
      await intruder.query("SELECT GET_LOCK(?, 10)", [name]);
    },
    waitMs: 20_000,
  },
});

registryConformance(test, {
  name: "registry-mysql (lease mode)",
  create: async () =>
    new MysqlRegistry({ mode: "lease", url: mysql.urlFor(leaseDb), leaseMs: 10_000 }),
  backups: true,
  requestedWorkerId: true,
  leaseLoss: {
    // The row is handed to someone else behind the holder's back: its next renewal finds out.
    induce: async (lease, { namespace }) => {
      const connection = await createConnection(mysql.connectionOptions(leaseDb));
      await connection.query(
        "UPDATE leaf_worker_lease SET holder = 'intruder' WHERE leaf_name = ? AND holder = ?",
        [namespace, (lease as LeasedLease).token],
      );
      await connection.end();
    },
    waitMs: 20_000,
  },
});
