// A residue set over real, independent MariaDB servers (@leaf/segment's ResidueSegmentStore with a
// MysqlSegmentStore per database): the contract (conformance suite), ids through one database of
// two killed, paused (SIGSTOP) and cut off (TcpProxy) under load, misconfigured residues refused,
// and a third database added under load. Every id any generator handed out is counted: none twice.
import { segmentStoreConformance } from "@leaf/conformance/segment-store";
import { ErrorCodes, isLeafError, type LeafError } from "@leaf/core";
import {
  formResidueSet,
  ResidueSegmentStore,
  type ResidueSegmentStoreOptions,
  SegmentIdGenerator,
} from "@leaf/segment";
import { countDuplicates, type MysqlHandle, startMysql, TcpProxy } from "@leaf/testkit";
import mysql from "mysql2/promise";
import { afterAll, beforeAll, describe, expect, it, test, vi } from "vitest";
import { MysqlSegmentStore } from "../src/index";

/** Retries `check` until it passes; generous, since these machines are shared (not a speed bound). */
const eventually = <T>(check: () => T | Promise<T>, timeout = 60_000) =>
  vi.waitFor(check, { timeout, interval: 50 });

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** One private MariaDB server, reached through a proxy that can cut it off. */
interface Server {
  name: string;
  db: MysqlHandle;
  proxy: TcpProxy;
}

const servers: Server[] = [];

beforeAll(async () => {
  for (const name of ["a", "b", "c"]) {
    const db = await startMysql({ useEnv: false });
    servers.push({ name, db, proxy: await TcpProxy.start({ targetPort: db.port }) });
  }
});

afterAll(async () => {
  for (const s of servers) {
    await s.proxy.close();
    await s.db.dispose();
  }
});

/** A database on `server`, as a store would be configured: through the server's proxy. */
interface Database {
  server: Server;
  database: string;
  table: string;
}

const storeOf = (d: Database) =>
  new MysqlSegmentStore({
    hosts: [{ host: "127.0.0.1", port: d.server.proxy.port }],
    user: d.server.db.user,
    database: d.database,
    table: d.table,
    connectTimeoutMs: 1_000,
    queryTimeoutMs: 2_000,
  });

async function databases(names: string[], table = "leaf_alloc"): Promise<Database[]> {
  const list: Database[] = [];
  for (const name of names) {
    const server = servers.find((s) => s.name === name)!;
    const database = await server.db.createDatabase("residue");
    const d = { server, database, table };
    const store = storeOf(d);
    await store.createSchema();
    await store.close();
    list.push(d);
  }
  return list;
}

/** Runs `sql` on database `d` directly (an operator's session). */
async function query(d: Database, sql: string, values: unknown[] = []): Promise<unknown> {
  const conn = await mysql.createConnection(d.server.db.connectionOptions(d.database));
  try {
    const [rows] = await conn.query(sql, values);
    return rows;
  } finally {
    await conn.end();
  }
}

async function form(list: Database[]) {
  const stores = list.map(storeOf);
  try {
    return await formResidueSet(stores, { names: list.map((d) => d.server.name) });
  } finally {
    for (const s of stores) await s.close();
  }
}

const residueStore = (list: Database[], options: Partial<ResidueSegmentStoreOptions> = {}) =>
  new ResidueSegmentStore({
    members: list.map(storeOf),
    names: list.map((d) => d.server.name),
    hedgeMs: 300,
    retry: { initialMs: 50, maxMs: 500 },
    ...options,
  });

const conformanceSets = new Map<string, Database[]>();

segmentStoreConformance(test, {
  name: "residue store over two MariaDB servers",
  async create({ namespace }) {
    let list = conformanceSets.get(namespace);
    if (list === undefined) {
      list = await databases(["a", "b"], namespace);
      conformanceSets.set(namespace, list);
      await form(list);
    }
    // A generous hedge: the suite's concurrent takers queue on one row of one server.
    return residueStore(list, { hedgeMs: 10_000 });
  },
  concurrentInstances: true,
  giveBack: true,
  // Strided ranges of several databases: no one floor judges them, and the generator sends none.
  floor: { unsupported: "ranges of several databases interleave: each member judges its own" },
  // Damaged or moved-back rows are each member's refusal; the set serves from another member.
  editRow: {
    unsupported:
      "a row damaged in one database is refused by that member and served from another (residue-store.test.ts of @leaf/segment)",
  },
  timeoutMs: 60_000,
});

/** One generator standing for one server process: its own residue store and pools. */
interface Taker {
  name: string;
  generator: SegmentIdGenerator;
  store: ResidueSegmentStore;
  ids: bigint[];
  /** performance.now() of each successful call, with the ids it got. */
  times: number[];
  errors: unknown[];
}

async function taker(name: string, list: Database[]): Promise<Taker> {
  const store = residueStore(list);
  const generator = new SegmentIdGenerator({
    store,
    dynamicStep: false,
    refreshIntervalMs: 1_000,
    retry: { initialMs: 20, maxMs: 200 },
  });
  try {
    await generator.start();
  } catch (error) {
    await generator.close();
    throw error;
  }
  return { name, generator, store, ids: [], times: [], errors: [] };
}

/** Takes ids from every taker until stopped, as a busy server does; failures are kept. */
function drive(takers: Taker[]) {
  let running = true;
  const loop = async (t: Taker) => {
    while (running) {
      try {
        for (const id of await t.generator.nextIds("t", 20)) t.ids.push(id);
        t.times.push(performance.now());
      } catch (error) {
        t.errors.push(error);
        await sleep(10);
      }
      await new Promise((resolve) => setImmediate(resolve));
    }
  };
  const loops = takers.map(loop);
  return {
    add(t: Taker) {
      takers.push(t);
      loops.push(loop(t));
    },
    async stop() {
      running = false;
      await Promise.all(loops);
    },
  };
}

const total = (takers: Taker[]) => takers.reduce((n, t) => n + t.ids.length, 0);
const duplicates = (takers: Taker[]) => countDuplicates(takers.map((t) => t.ids));

/** What happened to the takers between two counts: ids, failed calls, the longest wait. */
function window(takers: Taker[], from: { ids: number[]; errors: number[]; at: number }) {
  const now = performance.now();
  let longest = 0;
  for (const t of takers) {
    let last = from.at;
    for (const at of t.times) {
      if (at <= from.at) continue;
      longest = Math.max(longest, at - last);
      last = at;
    }
    longest = Math.max(longest, now - last);
  }
  return {
    ids: takers.map((t, i) => t.ids.slice(from.ids[i])),
    failed: takers.reduce((n, t, i) => n + t.errors.length - from.errors[i]!, 0),
    longestWaitMs: Math.round(longest),
  };
}

const mark = (takers: Taker[]) => ({
  ids: takers.map((t) => t.ids.length),
  errors: takers.map((t) => t.errors.length),
  at: performance.now(),
});

const codeOf = (code: string, reason?: string) => (error: unknown) =>
  isLeafError(error, code as LeafError["code"]) &&
  (reason === undefined || (error as LeafError).details.reason === reason);

describe("a residue set over two MariaDB servers", () => {
  it("keeps serving through a kill, a pause and a cut of either database, with no id twice", async () => {
    const list = await databases(["a", "b"]);
    await form(list);
    const admin = residueStore(list);
    await admin.createTag({ tag: "t", step: 1_000, startId: 1n });
    await admin.close();
    // One taker prefers a, the other b: both databases serve before the faults.
    const takers = [await taker("one", list), await taker("two", [list[1]!, list[0]!])];
    const load = drive(takers);
    const report: string[] = [];
    try {
      await eventually(() => expect(total(takers)).toBeGreaterThan(10_000));
      const faults: [
        string,
        (s: Server) => Promise<void> | void,
        (s: Server) => Promise<void> | void,
      ][] = [
        ["kill", (s) => s.db.kill(), (s) => s.db.start()],
        ["SIGSTOP", (s) => s.db.pause(), (s) => s.db.resume()],
        ["cut", (s) => s.proxy.cutOff(), (s) => s.proxy.heal()],
      ];
      for (const [fault, apply, undo] of faults) {
        for (const [down, up] of [
          [0, 1],
          [1, 0],
        ] as const) {
          const server = list[down]!.server;
          await apply(server);
          const from = mark(takers);
          // Ids keep coming from the other database: 2,000 more per taker, from its class.
          await eventually(() => {
            for (const [i, t] of takers.entries()) {
              const fresh = t.ids.slice(from.ids[i]);
              expect(fresh.filter((id) => id % 2n === BigInt(up)).length).toBeGreaterThan(2_000);
            }
          });
          await sleep(2_000);
          const seen = window(takers, from);
          report.push(
            `${fault} ${server.name}: ${seen.ids.reduce((n, l) => n + l.length, 0)} ids, ${seen.failed} failed calls, longest wait ${seen.longestWaitMs} ms`,
          );
          await undo(server);
          // Back: its member serves again once the other is gone (the next round shows it).
        }
      }
      // Both back: each database serves a taker that asks it first.
      await load.stop();
      const after = [await taker("three", list), await taker("four", [list[1]!, list[0]!])];
      for (const t of after)
        for (let i = 0; i < 100; i++) t.ids.push(await t.generator.nextId("t"));
      expect(after[0]!.ids.every((id) => id % 2n === 0n)).toBe(true);
      expect(after[1]!.ids.every((id) => id % 2n === 1n)).toBe(true);
      const everyone = [...takers, ...after];
      for (const t of after) await t.generator.close();
      const count = duplicates(everyone);
      console.log(
        `residue set under faults: ${count.total} ids, ${count.duplicates} twice; ${report.join("; ")}`,
      );
      expect(count.duplicates).toBe(0);
    } finally {
      await load.stop();
      for (const t of takers) await t.generator.close();
    }
  }, 300_000);

  it("refuses, at start and while running, a database whose residue was changed by hand, with no id twice", async () => {
    const list = await databases(["a", "b"]);
    await form(list);
    const admin = residueStore(list);
    await admin.createTag({ tag: "t", step: 500, startId: 1n });
    await admin.close();
    const takers = [await taker("one", list), await taker("two", [list[1]!, list[0]!])];
    const load = drive(takers);
    try {
      await eventually(() => expect(total(takers)).toBeGreaterThan(5_000));
      // An operator gives b a residue of its own making: 0 of 3 (the set holds 0 and 1 of 2), its
      // list of members left as it was (2 databases): a damaged record.
      await query(
        list[1]!,
        "UPDATE leaf_alloc_residue SET delta = 3, remainder = 0, version = version + 1",
      );
      const from = mark(takers);
      // Both takers go on from a: taker two's next range from b is refused (its record changed).
      await eventually(() => {
        for (const [i, t] of takers.entries()) {
          const fresh = t.ids.slice(from.ids[i]);
          expect(fresh.filter((id) => id % 2n === 0n).length).toBeGreaterThan(2_000);
        }
      });
      // A server starting now refuses the set with the reason, naming b. (Were it to start, it
      // would draw with the others: the count below says what it handed out twice.)
      const late = await taker("late", [list[1]!, list[0]!]).catch((error: unknown) => error);
      if (!isLeafError(late)) load.add(late as Taker);
      await sleep(1_000);
      // Another gives b the remainder a holds, with a list of members to match (b first, then a):
      // well-formed, but not the list a names for the epoch.
      const aRecord = (await query(list[0]!, "SELECT member_id FROM leaf_alloc_residue")) as {
        member_id: string;
      }[];
      await query(
        list[1]!,
        "UPDATE leaf_alloc_residue SET delta = 2, remainder = 0, members = JSON_ARRAY(member_id, ?), version = version + 1",
        [aRecord[0]!.member_id],
      );
      const later = await taker("later", [list[1]!, list[0]!]).catch((error: unknown) => error);
      if (!isLeafError(later)) load.add(later as Taker);
      const more = mark(takers);
      await eventually(() => {
        for (const [i, t] of takers.entries())
          expect(t.ids.length).toBeGreaterThan(more.ids[i]! + 2_000);
      });
      await load.stop();
      const count = duplicates(takers);
      console.log(`residue changed by hand: ${count.total} ids, ${count.duplicates} twice`);
      expect(count.duplicates).toBe(0);
      expect(late).toSatisfy(codeOf(ErrorCodes.CORRUPT_DATA, "bad-residue"));
      expect(later).toSatisfy(codeOf(ErrorCodes.INVALID_CONFIG, "other-list"));
      for (const t of takers) {
        const b = t.store.status().find((m) => m.name === "b")!;
        expect(b.state).toMatch(/refused|backoff|unverified/);
        expect(b.remainder).toBe(null);
      }
    } finally {
      await load.stop();
      for (const t of takers) await t.generator.close();
    }
  }, 180_000);

  it("refuses a residue table without the members column (not made by this version of the store): no start on it, nothing written by formResidueSet", async () => {
    const list = await databases(["a", "b"]);
    // A table and records made by hand, without the members column.
    for (const [i, d] of list.entries()) {
      await query(
        d,
        "CREATE TABLE leaf_alloc_residue (id tinyint(4) NOT NULL DEFAULT '1', set_id varchar(64) NOT NULL, member_id varchar(64) NOT NULL, epoch int(11) NOT NULL, delta int(11) NOT NULL, remainder int(11) NOT NULL, state varchar(16) NOT NULL, version bigint(20) NOT NULL, update_time timestamp NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP, PRIMARY KEY (id))",
      );
      await query(
        d,
        "INSERT INTO leaf_alloc_residue (id, set_id, member_id, epoch, delta, remainder, state, version) VALUES (1, 'hand-set', ?, 0, 2, ?, 'active', 2)",
        [`hand-member-${i}`, i],
      );
    }
    const notMine = /no members .*not a record written by this version of the store/;
    const store = residueStore(list, { startWaitMs: 5_000 });
    await expect(store.start()).rejects.toSatisfy(
      (error: unknown) =>
        codeOf(ErrorCodes.CORRUPT_DATA, "bad-residue")(error) && notMine.test(String(error)),
    );
    await store.close();
    await expect(form(list)).rejects.toSatisfy(codeOf(ErrorCodes.CORRUPT_DATA, "bad-residue"));
    for (const [i, d] of list.entries()) {
      expect(
        await query(d, "SELECT member_id, epoch, remainder, state FROM leaf_alloc_residue"),
      ).toEqual([{ member_id: `hand-member-${i}`, epoch: 0, remainder: i, state: "active" }]);
      expect(await query(d, "SHOW COLUMNS FROM leaf_alloc_residue LIKE 'members'")).toEqual([]);
    }
  });

  it("refuses the same database listed twice and databases of two different sets", async () => {
    const [a, b] = await databases(["a", "b"]);
    await form([a!, b!]);
    const twice = residueStore([a!, b!, { ...a! }], {
      startWaitMs: 5_000,
      names: ["a", "b", "a again"],
    });
    await expect(twice.start()).rejects.toSatisfy(
      codeOf(ErrorCodes.INVALID_CONFIG, "listed-twice"),
    );
    await twice.close();
    const [c] = await databases(["c"]);
    await form([c!]);
    const mixed = residueStore([a!, c!], { startWaitMs: 5_000 });
    await expect(mixed.start()).rejects.toSatisfy(codeOf(ErrorCodes.INVALID_CONFIG, "other-set"));
    await mixed.close();
  });

  it("adds a third database under load (2 to 3): new ranges above every id handed out, no id twice", async () => {
    const list = await databases(["a", "b", "c"]);
    const two = list.slice(0, 2);
    await form(two);
    const admin = residueStore(two);
    await admin.createTag({ tag: "t", step: 600, startId: 1n });
    await admin.createTag({ tag: "u", step: 300, startId: 1n });
    await admin.close();
    // Both takers draw from b: a stays far behind (its max id at the start id), which is the
    // case the raise is for.
    const [a, b, c] = list as [Database, Database, Database];
    const takers = [await taker("one", [b, a]), await taker("two", [b, a])];
    const load = drive(takers);
    try {
      await eventually(() => expect(total(takers)).toBeGreaterThan(10_000));
      const grown = await form(list);
      expect(grown).toMatchObject({ epoch: 1, unchanged: false });
      const R = grown.startsAt.get("t")!;
      // Each taker took one range of u from b at its start ([1, 301), [301, 601)): R is 602.
      expect(grown.startsAt.get("u")).toBe(602n);
      // New servers: one asks c first, one a (which handed out nothing before).
      load.add(await taker("three", [c, a, b]));
      load.add(await taker("four", [a, b, c]));
      const from = mark(takers);
      await eventually(() => {
        for (const [i, t] of takers.entries()) {
          expect(t.ids.length).toBeGreaterThan(from.ids[i]! + 3_000);
        }
      });
      await load.stop();
      const count = duplicates(takers);
      console.log(`2 to 3 under load: ${count.total} ids, ${count.duplicates} twice, R = ${R}`);
      expect(count.duplicates).toBe(0);
      // Taker one and two went on in the new layout, from b or a (never c's class: they do not
      // list c); the new ones only above R, mostly from the database they list first.
      for (const t of takers.slice(0, 2)) {
        const above = t.ids.filter((id) => id >= R);
        expect(above.filter((id) => id % 3n === 2n)).toEqual([]);
        expect(above.length).toBeGreaterThan(3_000);
      }
      for (const [t, first] of [
        [takers[2]!, 2n],
        [takers[3]!, 0n],
      ] as const) {
        expect(t.ids.filter((id) => id < R)).toEqual([]);
        expect(t.ids.filter((id) => id % 3n === first).length).toBeGreaterThan(t.ids.length / 2);
      }
      const residues = await Promise.all(
        list.map((d) => query(d, "SELECT delta, remainder, epoch, state FROM leaf_alloc_residue")),
      );
      expect(residues).toEqual(
        [0, 1, 2].map((i) => [{ delta: 3, remainder: i, epoch: 1, state: "active" }]),
      );
    } finally {
      await load.stop();
      for (const t of takers) await t.generator.close();
    }
  }, 240_000);
});
