// Writes that set a value are sent at most once (MariaDB). A statement the client gave up on (a
// query timeout) still runs on the server once the row lock it waits for is released; sent again,
// a give-back's second copy could find the max id back at the compared value after another store
// took the ids given back, and hand them out a second time. A second session holding
// `SELECT ... FOR UPDATE` on the row makes the wait real; every range is checked.
import { ErrorCodes, isLeafError } from "@leaf/core";
import type { SegmentRange } from "@leaf/segment";
import { type MysqlHandle, startMysql } from "@leaf/testkit";
import mysql from "mysql2/promise";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MysqlSegmentStore } from "../src/index";

let db: MysqlHandle;
let database: string;
let admin: mysql.Pool;
let tables = 0;

beforeAll(async () => {
  db = await startMysql({ useEnv: false });
  database = await db.createDatabase("segment_once_writes");
  admin = mysql.createPool({
    ...db.connectionOptions(database),
    connectionLimit: 4,
    supportBigNumbers: true,
    bigNumberStrings: true,
  });
}, 120_000);

afterAll(async () => {
  await admin?.end().catch(() => {});
  await db?.dispose();
});

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A fresh table holding tag "t" (max_id 1, step 1000), and its name. */
async function table(): Promise<string> {
  const name = `leaf_alloc_once_${tables++}`;
  const store = new MysqlSegmentStore({ url: db.urlFor(database), table: name });
  await store.createSchema();
  await store.createTag({ tag: "t", step: 1000, startId: 1n });
  await store.close();
  return name;
}

function store(name: string, queryTimeoutMs: number): MysqlSegmentStore {
  return new MysqlSegmentStore({ url: db.urlFor(database), table: name, queryTimeoutMs });
}

/** A second session holding the row of "t" locked (`SELECT ... FOR UPDATE`) until released. */
async function lockRow(name: string): Promise<{ release(): Promise<void> }> {
  const conn = await admin.getConnection();
  await conn.query("START TRANSACTION");
  await conn.query(`SELECT max_id FROM ${name} WHERE biz_tag = 't' FOR UPDATE`);
  return {
    async release() {
      await conn.query("COMMIT");
      conn.release();
    },
  };
}

/** Statements waiting on the server whose text contains `marker` (copies still queued). */
async function queued(marker: string): Promise<number> {
  const [rows] = await admin.query<mysql.RowDataPacket[]>(
    "SELECT COUNT(*) AS n FROM information_schema.processlist WHERE info LIKE ? AND info NOT LIKE '%processlist%'",
    [`%${marker}%`],
  );
  return Number(rows[0]!.n);
}

async function maxIdOf(name: string): Promise<bigint> {
  const [rows] = await admin.query<mysql.RowDataPacket[]>(
    `SELECT max_id FROM ${name} WHERE biz_tag = 't'`,
  );
  return BigInt(rows[0]!.max_id);
}

function overlaps(ranges: SegmentRange[]): string[] {
  const sorted = [...ranges].sort((a, b) => (a.start < b.start ? -1 : a.start > b.start ? 1 : 0));
  const found: string[] = [];
  for (let i = 1; i < sorted.length; i++) {
    const [before, after] = [sorted[i - 1]!, sorted[i]!];
    if (after.start < before.end) {
      found.push(`[${before.start}, ${before.end}) and [${after.start}, ${after.end})`);
    }
  }
  return found;
}

const unknownOutcome = (e: unknown) =>
  isLeafError(e, ErrorCodes.UNAVAILABLE) &&
  (e as { details?: { reason?: unknown } }).details?.reason === "outcome-unknown";

describe("writes that set a value are sent at most once (MariaDB, a row lock in another session)", () => {
  it("a give-back that times out behind the lock is not sent again: the range another store takes meanwhile is never handed out twice", async () => {
    const found: string[] = [];
    for (let round = 0; round < 3; round++) {
      const name = await table();
      const a = store(name, 1000);
      const b = store(name, 30_000);
      const c = store(name, 30_000);
      try {
        const held = await a.takeRange("t"); // [1, 1001): A hands out none of it
        expect([held.start, held.end]).toEqual([1n, 1001n]);
        const lock = await lockRow(name);
        // A's give-back waits behind the lock; B's range request queues behind it.
        const givingBack = a.giveBack("t", held.start, held.end).then(
          (given) => ({ given }),
          (error: unknown) => ({ error }),
        );
        await sleep(300);
        const takenByB = b.takeRange("t");
        // Past A's query timeout (1 s): a store that sends the give-back again has queued it now.
        await sleep(1500);
        const copies = await queued("AND max_id = ");
        await lock.release();
        const outcome = await givingBack;
        const rangeB = await takenByB;
        const rangeC = await c.takeRange("t");
        for (const overlap of overlaps([rangeB, rangeC])) found.push(`round ${round}: ${overlap}`);
        expect(copies).toBe(1);
        expect(outcome).toSatisfy(
          (o: { error?: unknown }) => "error" in o && unknownOutcome(o.error),
        );
        expect(a.stats().writesUnanswered).toBe(1);
        // The one copy ran once the lock was released: max id back to 1, then B's range from it.
        expect([rangeB.start, rangeB.end]).toEqual([1n, 1001n]);
        expect(await maxIdOf(name)).toBe(rangeC.end);
      } catch (error) {
        if (found.length === 0) throw error;
      } finally {
        await Promise.all([a.close(), b.close(), c.close()]);
      }
    }
    // Ranges B and C, each handed out by one store: no id in both.
    expect(found).toEqual([]);
  }, 120_000);

  it("a step change, a delete and a create that time out behind the lock are each sent once", async () => {
    const name = await table();
    const a = store(name, 1000);
    try {
      const cases: Array<[string, () => Promise<unknown>]> = [
        ["SET step = ", () => a.updateStep("t", 7)],
        ["FOR UPDATE", () => a.deleteTag("t")],
      ];
      for (const [marker, call] of cases) {
        const lock = await lockRow(name);
        const before = await queued(marker);
        const result = call().then(
          () => undefined,
          (error: unknown) => error,
        );
        await sleep(1800);
        // The copy A gave up on still waits on the server; no second copy joined it.
        expect(await queued(marker)).toBe(before + 1);
        await lock.release();
        expect(await result).toSatisfy(unknownOutcome);
        await until(async () => (await queued(marker)) === before);
      }
      // The delete's copy found its connection gone and rolled back: the tag is still there, with
      // the step the first copy set.
      const [rows] = await admin.query<mysql.RowDataPacket[]>(
        `SELECT step FROM ${name} WHERE biz_tag = 't'`,
      );
      expect(rows.map((r) => Number(r.step))).toEqual([7]);

      // A create of a tag whose new row is locked (the same name, inserted in another session).
      const conn = await admin.getConnection();
      await conn.query("START TRANSACTION");
      await conn.query(`INSERT INTO ${name} (biz_tag, max_id, step) VALUES ('u', 1, 10)`);
      const created = a.createTag({ tag: "u", step: 10 }).then(
        () => undefined,
        (error: unknown) => error,
      );
      await sleep(1800);
      expect(await queued("INSERT INTO")).toBe(1);
      await conn.query("ROLLBACK");
      conn.release();
      expect(await created).toSatisfy(unknownOutcome);
      expect(a.stats().writesUnanswered).toBe(3);
    } finally {
      await a.close();
    }
  }, 60_000);
});

async function until(condition: () => Promise<boolean>, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error("timed out waiting for the queued copies to end");
    await sleep(50);
  }
}

/** The processlist id of the one statement whose text contains `marker`. */
async function sessionRunning(marker: string): Promise<number> {
  let id: number | undefined;
  await until(async () => {
    const [rows] = await admin.query<mysql.RowDataPacket[]>(
      "SELECT id FROM information_schema.processlist WHERE info LIKE ? AND info NOT LIKE '%processlist%'",
      [`%${marker}%`],
    );
    id = rows[0] === undefined ? undefined : Number(rows[0].id);
    return id !== undefined;
  });
  return id!;
}

describe("statements the server interrupts (KILL QUERY, KILL CONNECTION)", () => {
  for (const kill of ["KILL QUERY", "KILL CONNECTION"]) {
    it(`a delete interrupted by ${kill} inside its transaction rejects UNAVAILABLE outcome-unknown, and every range stays unique`, async () => {
      const name = await table();
      const a = store(name, 30_000);
      const b = store(name, 30_000);
      const ranges: SegmentRange[] = [];
      try {
        ranges.push(await a.takeRange("t"));
        // The delete holds the row's lock and waits on the deleted tags' record of "t", which
        // another session holds; a range of A queues behind the row's lock.
        await admin.query(`INSERT INTO ${name}_deleted (biz_tag, max_id) VALUES ('t', 0)`);
        const holder = await admin.getConnection();
        await holder.query("START TRANSACTION");
        await holder.query(`SELECT * FROM ${name}_deleted WHERE biz_tag = 't' FOR UPDATE`);
        const deleted = b.deleteTag("t").then(
          () => undefined,
          (error: unknown) => error,
        );
        const victim = await sessionRunning("ON DUPLICATE KEY");
        const queuedRange = a.takeRange("t");
        await until(async () => (await queued("max_id = max_id + step")) === 1);
        await admin.query(`${kill} ${victim}`);
        const error = await deleted;
        await holder.query("COMMIT");
        holder.release();
        ranges.push(await queuedRange);
        expect(error).toSatisfy(unknownOutcome);
        // KILL QUERY answers ER_QUERY_INTERRUPTED (1317); KILL CONNECTION closes the socket.
        expect((error as { details?: { mysql?: unknown } }).details?.mysql).toBe(
          kill === "KILL QUERY" ? "interrupted" : "unreachable",
        );
        // The delete's transaction was rolled back with its connection: the tag is still served.
        for (const s of [a, b]) ranges.push(await s.takeRange("t"));
        expect(overlaps(ranges)).toEqual([]);
        expect(ranges).toHaveLength(4);
        expect(b.stats().writesUnanswered).toBe(1);
      } finally {
        await Promise.all([a.close(), b.close()]);
      }
    }, 60_000);
  }

  it("a range whose statement is interrupted by KILL QUERY is taken again, not refused", async () => {
    const name = await table();
    const a = store(name, 30_000);
    try {
      const lock = await lockRow(name);
      const range = a.takeRange("t");
      const victim = await sessionRunning("max_id = max_id + step");
      await admin.query(`KILL QUERY ${victim}`);
      await lock.release();
      const taken = await range;
      expect([taken.start, taken.end]).toEqual([1n, 1001n]);
      expect(await maxIdOf(name)).toBe(1001n);
    } finally {
      await a.close();
    }
  }, 60_000);
});
