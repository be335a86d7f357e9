// Fixed mode and lease mode in one database against a private MariaDB. Their ids live in two tables
// (leaf_workerid_alloc, leaf_worker_lease); a fixed node's id 1 and a lease node granted 1 would
// issue the same ids. Each mode writes its own row, then reads the other's table: a fixed id is
// never leased, an id lease mode used refuses fixed mode, and two racing starts never both win.
// Every id the granted leases issue is counted.
import { ErrorCodes, isLeafError, layouts, SnowflakeGenerator, type WorkerLease } from "@leaf/core";
import { countDuplicates, type MysqlHandle, startMysql, stopAll } from "@leaf/testkit";
import { createConnection, type RowDataPacket } from "mysql2/promise";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createSchema, MysqlRegistry } from "../src/index";

let mysql: MysqlHandle;
beforeAll(async () => {
  mysql = await startMysql({ useEnv: false });
});
afterAll(() => stopAll());

const LEASE = { leaseMs: 3000, queryTimeoutMs: 2000 };
const IDS_PER_LEASE = 20_000;
let databases = 0;

/** A fresh database with both modes' tables. */
async function database(): Promise<string> {
  const url = mysql.urlFor(await mysql.createDatabase(`leaf_mix${databases++}`));
  await createSchema(url, { mode: "fixed" });
  await createSchema(url, { mode: "lease" });
  return url;
}

const node = (i: number) => ({ name: "pods", ip: `10.5.0.${i}`, port: 8080 });

/** The ids the holders of `leases` issue side by side, as live nodes do (the leaf layout). */
function issue(leases: readonly WorkerLease[]): string[][] {
  const generators = leases.map(
    (lease) =>
      new SnowflakeGenerator({
        workerId: lease.workerId,
        layout: layouts.leaf,
        lastTimestamp: lease.lastTimestamp,
      }),
  );
  const ids = leases.map((): string[] => []);
  for (let drawn = 0; drawn < IDS_PER_LEASE; drawn += 100) {
    for (const [i, generator] of generators.entries()) {
      ids[i]!.push(...generator.nextIds(100).map(String));
    }
  }
  return ids;
}

async function rows(url: string, sql: string): Promise<RowDataPacket[]> {
  const connection = await createConnection(url);
  try {
    const [result] = await connection.query<RowDataPacket[]>(sql);
    return result;
  } finally {
    await connection.end();
  }
}

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new Error("expected a rejection");
}

describe("fixed mode and lease mode in one database", () => {
  it("never leases a fixed node's id, requested or not, and refuses fixed mode an id lease mode used", async () => {
    const url = await database();
    const fixed = new MysqlRegistry({ mode: "fixed", url, cacheDir: false });
    const leased = new MysqlRegistry({ mode: "lease", url, ...LEASE });
    try {
      const f = await fixed.acquire({ node: node(1), maxWorkerId: 1023 });
      expect(f.workerId).toBe(1);
      const asked = await rejection(
        leased.acquire({ node: node(2), maxWorkerId: 1023, workerId: 1 }),
      );
      expect(isLeafError(asked, ErrorCodes.WORKER_ID_IN_USE)).toBe(true);
      expect((asked as Error).message).toContain("worker id 1 is fixed mode's id of 10.5.0.1:8080");
      // Lease mode takes 0 first, then skips 1.
      const l0 = await leased.acquire({ node: node(3), maxWorkerId: 1023 });
      const l2 = await leased.acquire({ node: node(4), maxWorkerId: 1023 });
      expect([l0.workerId, l2.workerId]).toEqual([0, 2]);
      // A new fixed node's row is id 2, which lease mode holds: refused, and its row removed.
      const second = await rejection(fixed.acquire({ node: node(5), maxWorkerId: 1023 }));
      expect(isLeafError(second, ErrorCodes.WORKER_ID_IN_USE)).toBe(true);
      expect((second as Error).message).toContain("leased now by 10.5.0.4:8080");
      expect(await rows(url, "SELECT ip_port FROM leaf_workerid_alloc ORDER BY id")).toEqual([
        { ip_port: "10.5.0.1:8080" },
      ]);
      const count = countDuplicates(issue([f, l0, l2]));
      expect(count.duplicates).toBe(0);
      await Promise.all([f.release(), l0.release(), l2.release()]);
    } finally {
      await fixed.close();
      await leased.close();
    }
  });

  it("two starts racing on a fresh database, a fixed node and a lease-mode pod asking for id 1, never both win", async () => {
    const rounds = 20;
    const issued: string[][] = [];
    const outcomes: string[] = [];
    let both = 0;
    for (let round = 0; round < rounds; round++) {
      const url = await database();
      const fixed = new MysqlRegistry({ mode: "fixed", url, cacheDir: false });
      const leased = new MysqlRegistry({ mode: "lease", url, ...LEASE });
      const [f, l] = await Promise.allSettled([
        fixed.acquire({ node: node(1), maxWorkerId: 1023 }),
        leased.acquire({ node: node(2), maxWorkerId: 1023, workerId: 1 }),
      ]);
      outcomes.push(
        `${f.status === "fulfilled" ? `F${f.value.workerId}` : "f"}/${l.status === "fulfilled" ? `L${l.value.workerId}` : "l"}`,
      );
      const granted = [f, l].flatMap((s) => (s.status === "fulfilled" ? [s.value] : []));
      if (granted.length === 2) both++;
      issued.push(...issue(granted));
      for (const settled of [f, l]) {
        if (settled.status === "rejected") {
          expect(isLeafError(settled.reason, ErrorCodes.WORKER_ID_IN_USE)).toBe(true);
        }
      }
      // A refused start removed the row it inserted: it blocks nobody later.
      if (f.status === "rejected") {
        expect(await rows(url, "SELECT id FROM leaf_workerid_alloc")).toEqual([]);
      }
      if (l.status === "rejected") {
        expect(await rows(url, "SELECT worker_id FROM leaf_worker_lease")).toEqual([]);
      }
      for (const lease of granted) await lease.release();
      await fixed.close();
      await leased.close();
    }
    const count = countDuplicates(issued);
    console.log(
      `fixed/lease race: both granted in ${both} of ${rounds} rounds; ${count.duplicates} of ${count.total} ids repeated; ${outcomes.join(" ")}`,
    );
    expect(both).toBe(0);
    expect(count.duplicates).toBe(0);
  }, 240_000);
});
