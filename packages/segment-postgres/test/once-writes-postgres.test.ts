// Writes that set a value are sent at most once (PostgreSQL). A statement the client gave up on
// still runs on the server once the row lock it waits for is released, and an answer lost on the
// network leaves the client unsure whether it ran; sent again, a give-back could find the max id
// back at the compared value after another store took the ids given back, and hand them out a
// second time. A second session holding `SELECT ... FOR UPDATE` on the row makes the wait real, a
// TcpProxy cut loses the answer; every id is counted.
import { ErrorCodes, isLeafError } from "@leaf/core";
import type { SegmentRange } from "@leaf/segment";
import {
  countDuplicates,
  type PostgresHandle,
  startPostgres,
  TcpProxy,
  waitUntil,
} from "@leaf/testkit";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PostgresSegmentStore, type PostgresSegmentStoreOptions } from "../src/index";

let db: PostgresHandle;
let database: string;
let admin: pg.Pool;
let tables = 0;

beforeAll(async () => {
  db = await startPostgres({ useEnv: false });
  database = await db.createDatabase("segment_once_writes");
  admin = new pg.Pool({ ...db.connectionOptions(database), max: 4 });
  admin.on("error", () => {});
}, 120_000);

afterAll(async () => {
  await admin?.end().catch(() => {});
  await db?.dispose();
});

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A fresh table holding tag "t" (max_id 1, step 1000), and its name. */
async function table(): Promise<string> {
  const name = `leaf_alloc_once_${tables++}`;
  const store = new PostgresSegmentStore({ url: db.urlFor(database), table: name });
  await store.createSchema();
  await store.createTag({ tag: "t", step: 1000, startId: 1n });
  await store.close();
  return name;
}

function store(
  name: string,
  queryTimeoutMs: number,
  more: Partial<PostgresSegmentStoreOptions> = {},
): PostgresSegmentStore {
  return new PostgresSegmentStore({
    url: db.urlFor(database),
    table: name,
    queryTimeoutMs,
    ...more,
  });
}

/** A second session holding the row of "t" locked (`SELECT ... FOR UPDATE`) until released. */
async function lockRow(name: string): Promise<{ release(): Promise<void> }> {
  const conn = await admin.connect();
  await conn.query("BEGIN");
  await conn.query(`SELECT max_id FROM ${name} WHERE biz_tag = 't' FOR UPDATE`);
  return {
    async release() {
      await conn.query("COMMIT");
      conn.release();
    },
  };
}

/** Statements running on the server whose text contains `marker` (copies still queued). */
async function queued(marker: string): Promise<number> {
  const { rows } = await admin.query(
    "SELECT count(*)::int AS n FROM pg_stat_activity WHERE state = 'active' AND query LIKE $1 AND pid <> pg_backend_pid()",
    [`%${marker}%`],
  );
  return Number(rows[0].n);
}

/** Waits until `n` statements whose text contains `marker` run on the server. */
const queuedReaches = (marker: string, n: number) =>
  waitUntil(`${n} statement(s) like ${marker}`, async () => (await queued(marker)) === n);

/** The backend pid of the one statement whose text contains `marker`. */
async function backendRunning(marker: string): Promise<number> {
  let pid: number | undefined;
  await waitUntil(`a statement like ${marker}`, async () => {
    const { rows } = await admin.query(
      "SELECT pid FROM pg_stat_activity WHERE state = 'active' AND query LIKE $1 AND pid <> pg_backend_pid()",
      [`%${marker}%`],
    );
    pid = rows[0]?.pid;
    return pid !== undefined;
  });
  return pid!;
}

async function maxIdOf(name: string): Promise<bigint> {
  const { rows } = await admin.query(
    `SELECT max_id::text AS max_id FROM ${name} WHERE biz_tag = 't'`,
  );
  return BigInt(rows[0].max_id);
}

/** Every id of the ranges, one list per range: ids in two of them are handed out twice. */
const idsOf = (ranges: SegmentRange[]) =>
  ranges.map((r) => Array.from({ length: Number(r.end - r.start) }, (_, i) => r.start + BigInt(i)));

function overlaps(ranges: SegmentRange[]): number {
  return countDuplicates(idsOf(ranges)).duplicates;
}

const unknownOutcome = (e: unknown) =>
  isLeafError(e, ErrorCodes.UNAVAILABLE) &&
  (e as { details?: { reason?: unknown } }).details?.reason === "outcome-unknown";

const GIVE_BACK = "AND max_id = $3";
const TAKE = "max_id = max_id + step";

describe("writes that set a value are sent at most once (PostgreSQL)", () => {
  it("a give-back whose answer a TcpProxy cut loses is not sent again: the range another store took meanwhile is never handed out twice", async () => {
    const twice: number[] = [];
    for (let round = 0; round < 3; round++) {
      const name = await table();
      const proxy = await TcpProxy.start({ targetPort: db.port });
      const a = new PostgresSegmentStore({
        hosts: [{ host: "127.0.0.1", port: proxy.port }],
        user: db.user,
        database,
        table: name,
        queryTimeoutMs: 30_000,
        connectTimeoutMs: 3_000,
      });
      const b = store(name, 30_000);
      const c = store(name, 30_000);
      try {
        const held = await a.takeRange("t"); // [1, 1001): A hands out none of it
        expect([held.start, held.end]).toEqual([1n, 1001n]);
        const lock = await lockRow(name);
        // A's give-back reaches the server and waits behind the lock; B's range queues behind it.
        const givingBack = a.giveBack("t", held.start, held.end).then(
          (given) => ({ given }),
          (error: unknown) => ({ error }),
        );
        await queuedReaches(GIVE_BACK, 1);
        const takenByB = b.takeRange("t");
        await queuedReaches(TAKE, 1);
        // The network between A and the server goes; the lock is released: the give-back runs
        // (max id back to 1), then B's range [1, 1001), and A's answer is lost.
        proxy.cutOff();
        await lock.release();
        const rangeB = await takenByB;
        // The network comes back: A's connection, which lost the answer, is reset.
        proxy.heal();
        const outcome = await givingBack;
        const rangeC = await c.takeRange("t");
        twice.push(overlaps([rangeB, rangeC]));
        expect([rangeB.start, rangeB.end]).toEqual([1n, 1001n]);
        expect(outcome).toSatisfy(
          (o: { error?: unknown }) => "error" in o && unknownOutcome(o.error),
        );
        expect(a.stats()).toMatchObject({ writesUnanswered: 1, givenBack: 0 });
        expect([rangeC.start, await maxIdOf(name)]).toEqual([1001n, 2001n]);
      } finally {
        await Promise.all([a.close(), b.close(), c.close()]);
        await proxy.close();
        console.log(`cut give-back round ${round}: ${twice[round] ?? "?"} ids handed out twice`);
      }
    }
    expect(twice).toEqual([0, 0, 0]);
  }, 120_000);

  it("a give-back that times out behind the lock is not sent again: one copy waits on the server, and no id is handed out twice", async () => {
    const twice: number[] = [];
    for (let round = 0; round < 3; round++) {
      const name = await table();
      const a = store(name, 1000);
      const b = store(name, 30_000);
      const c = store(name, 30_000);
      try {
        const held = await a.takeRange("t");
        const lock = await lockRow(name);
        const givingBack = a.giveBack("t", held.start, held.end).then(
          (given) => ({ given }),
          (error: unknown) => ({ error }),
        );
        await queuedReaches(GIVE_BACK, 1);
        const takenByB = b.takeRange("t");
        // Past A's query timeout (1 s): a store that sends the give-back again has queued it now.
        await sleep(1_800);
        const copies = await queued(GIVE_BACK);
        await lock.release();
        const outcome = await givingBack;
        const rangeB = await takenByB;
        const rangeC = await c.takeRange("t");
        twice.push(overlaps([rangeB, rangeC]));
        expect(copies).toBe(1);
        expect(outcome).toSatisfy(
          (o: { error?: unknown }) => "error" in o && unknownOutcome(o.error),
        );
        // The one copy ran once the lock was released: max id back to 1, then B's range from it.
        expect([rangeB.start, rangeB.end]).toEqual([1n, 1001n]);
        expect(await maxIdOf(name)).toBe(rangeC.end);
      } finally {
        await Promise.all([a.close(), b.close(), c.close()]);
        console.log(
          `timed-out give-back round ${round}: ${twice[round] ?? "?"} ids handed out twice`,
        );
      }
    }
    expect(twice).toEqual([0, 0, 0]);
  }, 120_000);

  it("a step change, a delete and a create that time out behind a lock are each sent once", async () => {
    const name = await table();
    const a = store(name, 1000);
    try {
      for (const [marker, call] of [
        ["SET step = $1", () => a.updateStep("t", 7)],
        ["WITH gone AS (DELETE", () => a.deleteTag("t")],
      ] as const) {
        const lock = await lockRow(name);
        const result = (call as () => Promise<unknown>)().then(
          () => undefined,
          (error: unknown) => error,
        );
        await queuedReaches(marker, 1);
        await sleep(1_800);
        // The copy A gave up on still waits on the server; no second copy joined it.
        expect(await queued(marker)).toBe(1);
        await lock.release();
        expect(await result).toSatisfy(unknownOutcome);
        await queuedReaches(marker, 0);
      }
      // Each copy ran once, as one statement: the step was set, then the tag deleted with its
      // max id recorded.
      const { rows: left } = await admin.query(`SELECT step FROM ${name}`);
      const { rows: deleted } = await admin.query(
        `SELECT max_id::text AS max_id FROM ${name}_deleted WHERE biz_tag = 't'`,
      );
      expect([left, deleted]).toEqual([[], [{ max_id: "1" }]]);

      // A create of a tag whose new row another session is inserting (uncommitted).
      const conn = await admin.connect();
      await conn.query("BEGIN");
      await conn.query(`INSERT INTO ${name} (biz_tag, max_id, step) VALUES ('u', 1, 10)`);
      const created = a.createTag({ tag: "u", step: 10 }).then(
        () => undefined,
        (error: unknown) => error,
      );
      await queuedReaches("INSERT INTO", 1);
      await sleep(1_800);
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

describe("statements the server interrupts (pg_cancel_backend, pg_terminate_backend)", () => {
  for (const [kill, kind] of [
    ["pg_cancel_backend", "interrupted"],
    ["pg_terminate_backend", "unreachable"],
  ] as const) {
    it(`a delete stopped by ${kill} while it waits rejects UNAVAILABLE outcome-unknown, and every range stays unique`, async () => {
      const name = await table();
      const a = store(name, 30_000);
      const b = store(name, 30_000);
      const ranges: SegmentRange[] = [];
      try {
        ranges.push(await a.takeRange("t"));
        const lock = await lockRow(name);
        const deleted = b.deleteTag("t").then(
          () => undefined,
          (error: unknown) => error,
        );
        const victim = await backendRunning("WITH gone AS (DELETE");
        const queuedRange = a.takeRange("t");
        await queuedReaches(TAKE, 1);
        await admin.query(`SELECT ${kill}($1)`, [victim]);
        const error = await deleted;
        await lock.release();
        ranges.push(await queuedRange);
        expect(error).toSatisfy(unknownOutcome);
        // A cancel answers 57014 (query_canceled); a terminate closes the session (57P01).
        expect((error as { details?: { postgres?: unknown } }).details?.postgres).toBe(kind);
        // The delete was rolled back: the tag is still served, by both stores.
        for (const s of [a, b]) ranges.push(await s.takeRange("t"));
        expect(overlaps(ranges)).toBe(0);
        expect(ranges).toHaveLength(4);
        expect(b.stats().writesUnanswered).toBe(1);
      } finally {
        await Promise.all([a.close(), b.close()]);
      }
    }, 60_000);
  }

  it("a range whose statement is cancelled while it waits is taken again, not refused", async () => {
    const name = await table();
    const a = store(name, 30_000);
    try {
      const lock = await lockRow(name);
      const range = a.takeRange("t");
      const victim = await backendRunning(TAKE);
      await admin.query("SELECT pg_cancel_backend($1)", [victim]);
      // The second try waits behind the lock too.
      await queuedReaches(TAKE, 1);
      await lock.release();
      const taken = await range;
      expect([taken.start, taken.end]).toEqual([1n, 1001n]);
      expect(await maxIdOf(name)).toBe(1001n);
    } finally {
      await a.close();
    }
  }, 60_000);
});
