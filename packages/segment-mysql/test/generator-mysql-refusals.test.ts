// Operator damage to a leaf_alloc row under load, on a real MariaDB: a max_id moved back (by three
// ranges, or reset to 1) and a negative step. Two generators stand for two servers; every id they
// hand out is counted and none may repeat; the tag stops being served, with the reason.
import { ErrorCodes, isLeafError } from "@leaf/core";
import { SegmentIdGenerator } from "@leaf/segment";
import { countDuplicates, type MysqlHandle, startMysql } from "@leaf/testkit";
import mysql from "mysql2/promise";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { MysqlSegmentStore } from "../src/index";

/** Retries `check` until it passes; generous, since these machines are shared (not a speed bound). */
const eventually = <T>(check: () => T | Promise<T>) =>
  vi.waitFor(check, { timeout: 60_000, interval: 20 });

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

let db: MysqlHandle;
let database: string;
let admin: mysql.Pool;
let tables = 0;

beforeAll(async () => {
  db = await startMysql({ useEnv: false });
  database = await db.createDatabase("segment_refusals");
  admin = mysql.createPool({
    ...db.connectionOptions(database),
    connectionLimit: 2,
    supportBigNumbers: true,
    bigNumberStrings: true,
  });
});

afterAll(async () => {
  await admin?.end().catch(() => {});
  await db?.dispose();
});

async function table(maxId: bigint, step: number): Promise<string> {
  const name = `leaf_alloc_refusals_${tables++}`;
  const store = new MysqlSegmentStore({ url: db.urlFor(database), table: name });
  await store.createSchema();
  await store.close();
  await admin.query(`INSERT INTO ${name} (biz_tag, max_id, step) VALUES ('t', ?, ?)`, [
    maxId,
    step,
  ]);
  return name;
}

async function maxIdOf(name: string): Promise<bigint> {
  const [rows] = await admin.query<mysql.RowDataPacket[]>(`SELECT max_id FROM ${name}`);
  return BigInt(rows[0]!.max_id);
}

interface Server {
  generator: SegmentIdGenerator;
  ids: bigint[];
  errors: unknown[];
  refusals: unknown[];
}

async function server(name: string, dynamicStep = false): Promise<Server> {
  const s: Server = { generator: undefined!, ids: [], errors: [], refusals: [] };
  s.generator = new SegmentIdGenerator({
    store: new MysqlSegmentStore({ url: db.urlFor(database), table: name }),
    dynamicStep,
    // Leaf's double buffer: a node then holds at most two ranges, so a max_id lowered by three is
    // below what every node took (a deeper prefetch widens that window: see the README).
    prefetch: false,
    exhaustedWaitMs: 200,
    // Long: the tests call refresh() themselves, to show nothing happens without one.
    refreshIntervalMs: 600_000,
    retry: { initialMs: 10, maxMs: 50 },
    onError: (error, context) => {
      if (context.refused) s.refusals.push(error);
    },
  });
  await s.generator.start();
  return s;
}

/** Both servers take ids as fast as they can until stopped; failures are kept, not thrown. */
function drive(servers: Server[]) {
  let running = true;
  const loops = servers.map(async (s) => {
    while (running) {
      try {
        for (const id of await s.generator.nextIds("t", 50)) s.ids.push(id);
      } catch (error) {
        s.errors.push(error);
        await sleep(5);
      }
      await new Promise((resolve) => setImmediate(resolve));
    }
  });
  return async () => {
    running = false;
    await Promise.all(loops);
  };
}

/** Ids handed out more than once, across every server. */
const duplicates = (servers: Server[]) => countDuplicates(servers.map((s) => s.ids)).duplicates;

const total = (servers: Server[]) => servers.reduce((n, s) => n + s.ids.length, 0);

describe("SegmentIdGenerator on MariaDB, when an operator damages the row under load", () => {
  // Each node judges against its own ranges (README): the lowered max_id must be below the ranges
  // of both. Three ranges back is, unless one node took three ranges in a row meanwhile (a loaded
  // machine does that), so it goes at least two ranges below the lower of the two nodes' ends.
  for (const [title, damage] of [
    [
      "lowered by three ranges",
      (step: number, lowestHeldEnd: bigint) =>
        `max_id = LEAST(max_id - ${3 * step}, ${lowestHeldEnd - 2n * BigInt(step)})`,
    ],
    ["reset to 1", () => "max_id = 1"],
  ] as const) {
    it(`stops serving a tag whose max_id is ${title}, with the reason, serving no id twice and advancing nothing`, async () => {
      const step = 200;
      const name = await table(1n, step);
      const servers = [await server(name), await server(name)];
      const stop = drive(servers);
      try {
        await eventually(() => expect(total(servers)).toBeGreaterThan(20_000));
        const [lowestHeldEnd] = servers
          .map((s) => s.generator.snapshot("t")!.heldEnd!)
          .sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
        await admin.query(`UPDATE ${name} SET ${damage(step, lowestHeldEnd!)} WHERE biz_tag = 't'`);
        // Each server refuses its next range and stops serving the tag.
        await eventually(() => {
          for (const s of servers) {
            expect(s.refusals).toHaveLength(1);
            expect(s.generator.snapshot("t")!.refused?.reason).toBe("max-id-moved-back");
          }
        });
        const lowered = await maxIdOf(name);
        const served = total(servers);
        // Many retry periods later: nothing served, nothing retried, max_id where the operator put it.
        await sleep(500);
        expect(total(servers)).toBe(served);
        expect(await maxIdOf(name)).toBe(lowered);
        for (const s of servers) {
          expect(s.refusals).toHaveLength(1);
          const last = s.errors[s.errors.length - 1];
          expect(last).toSatisfy(
            (e: unknown) =>
              isLeafError(e, ErrorCodes.CORRUPT_DATA) &&
              e.details.reason === "max-id-moved-back" &&
              new RegExp(`tag "t" is not served: .*its max id is ${lowered} in table ${name}`).test(
                e.message,
              ),
          );
        }
        // A refresh before the fix changes nothing.
        for (const s of servers) await s.generator.refresh();
        await sleep(100);
        expect(total(servers)).toBe(served);

        // The operator sets max_id at or above what every server reports, and refreshes.
        const floors = servers.map((s) =>
          BigInt((s.refusals[0] as { details: { floor: string } }).details.floor),
        );
        const fixed = floors.sort((a, b) => (a < b ? 1 : a > b ? -1 : 0))[0]!;
        await admin.query(`UPDATE ${name} SET max_id = ? WHERE biz_tag = 't'`, [fixed]);
        for (const s of servers) await s.generator.refresh();
        const before = servers.map((s) => s.ids.length);
        await eventually(() => {
          for (const [i, s] of servers.entries())
            expect(s.ids.length).toBeGreaterThan(before[i]! + 2_000);
        });
        await stop();
        expect(duplicates(servers)).toBe(0);
      } finally {
        await stop();
        for (const s of servers) await s.generator.close();
      }
    }, 120_000);
  }

  it("refuses a row with a negative step: a clear error, no id at or below 0, max_id unchanged", async () => {
    const name = await table(1n, -1000);
    // The dynamic step is on, as by default: a step taken from a negative one must not slip through.
    const servers = [await server(name, true), await server(name, true)];
    const stop = drive(servers);
    try {
      await eventually(() => {
        for (const s of servers) {
          expect(s.generator.snapshot("t")!.refused?.reason).toBe("bad-step");
          expect(s.errors.length).toBeGreaterThan(3);
        }
      });
      await sleep(300);
      await stop();
      for (const s of servers) {
        expect(s.ids).toEqual([]);
        expect(s.refusals).toHaveLength(1);
        expect(s.errors[s.errors.length - 1]).toSatisfy(
          (e: unknown) =>
            isLeafError(e, ErrorCodes.CORRUPT_DATA) &&
            /its stored step is -1000 in table .* expected an integer from 1 to 2147483647/.test(
              e.message,
            ),
        );
      }
      expect(await maxIdOf(name)).toBe(1n);

      // Fixed by the operator: ids from 1 on, none twice.
      await admin.query(`UPDATE ${name} SET step = 1000 WHERE biz_tag = 't'`);
      const again = drive(servers);
      for (const s of servers) await s.generator.refresh();
      await eventually(() => {
        for (const s of servers) expect(s.ids.length).toBeGreaterThan(2_000);
      });
      await again();
      const all = servers.flatMap((s) => s.ids);
      expect(all.every((id) => id >= 1n)).toBe(true);
      expect(duplicates(servers)).toBe(0);
    } finally {
      await stop();
      for (const s of servers) await s.generator.close();
    }
  }, 120_000);
});
