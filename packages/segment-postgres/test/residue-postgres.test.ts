// A residue set over real, independent PostgreSQL servers (@leaf/segment's ResidueSegmentStore with
// a PostgresSegmentStore per database): the residue record's compare-and-set, the contract
// (conformance suite), ids through one database of two killed, paused (SIGSTOP) and cut off
// (TcpProxy) under load, and a third database added under load. Every id is counted: none twice.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { segmentStoreConformance } from "@leaf/conformance/segment-store";
import { ErrorCodes, isLeafError } from "@leaf/core";
import {
  formResidueSet,
  type ResidueRecord,
  ResidueSegmentStore,
  SegmentIdGenerator,
} from "@leaf/segment";
import {
  countRepeatedIds,
  IdLog,
  type PostgresHandle,
  startPostgres,
  TcpProxy,
  waitUntil,
} from "@leaf/testkit";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it, test } from "vitest";
import { PostgresSegmentStore, residueSchema } from "../src/index";

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** One private PostgreSQL server, reached through a proxy that can cut it off. */
interface Server {
  name: string;
  db: PostgresHandle;
  proxy: TcpProxy;
}

const servers: Server[] = [];

beforeAll(async () => {
  for (const name of ["a", "b", "c"]) {
    const db = await startPostgres({ useEnv: false });
    servers.push({ name, db, proxy: await TcpProxy.start({ targetPort: db.port }) });
  }
}, 180_000);

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

const urlOf = (d: Database) =>
  `postgres://${d.server.db.user}@127.0.0.1:${d.server.proxy.port}/${d.database}`;

const storeOf = (d: Database) =>
  new PostgresSegmentStore({
    url: urlOf(d),
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

/** Runs `sql` on database `d` directly (an operator's session); its rows. */
async function query<T = Record<string, unknown>>(d: Database, sql: string): Promise<T[]> {
  const client = new pg.Client(d.server.db.connectionOptions(d.database));
  await client.connect();
  try {
    return (await client.query(sql)).rows as T[];
  } finally {
    await client.end();
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

const residueStore = (list: Database[], hedgeMs = 300) =>
  new ResidueSegmentStore({
    members: list.map(storeOf),
    names: list.map((d) => d.server.name),
    hedgeMs,
    retry: { initialMs: 50, maxMs: 500 },
  });

const conformanceSets = new Map<string, Database[]>();

segmentStoreConformance(test, {
  name: "residue store over two PostgreSQL servers",
  async create({ namespace }) {
    let list = conformanceSets.get(namespace);
    if (list === undefined) {
      list = await databases(["a", "b"], namespace);
      conformanceSets.set(namespace, list);
      await form(list);
    }
    // A generous hedge: the suite's concurrent takers queue on one row of one server.
    return residueStore(list, 10_000);
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

const record = (version: number, state: ResidueRecord["state"] = "joining"): ResidueRecord => ({
  setId: "set-1",
  memberId: "member-1",
  epoch: 0,
  delta: 2,
  remainder: 1,
  state,
  version,
  members: ["member-0", "member-1"],
});

describe("the residue record in PostgreSQL", () => {
  it("is read as none before the set is formed, then written only over the version expected", async () => {
    const [d] = await databases(["a"]);
    const store = storeOf(d!);
    try {
      // No table yet: never formed here.
      expect(await store.readResidue()).toBeUndefined();
      expect(await store.writeResidue(record(1), null)).toBe(true);
      expect(await store.readResidue()).toEqual(record(1));
      // A second first write, or a write over another version, changes nothing.
      expect(await store.writeResidue(record(7), null)).toBe(false);
      expect(await store.writeResidue(record(3, "active"), 2)).toBe(false);
      expect(await store.readResidue()).toEqual(record(1));
      expect(await store.writeResidue(record(2, "active"), 1)).toBe(true);
      expect(await store.readResidue()).toEqual(record(2, "active"));
      await expect(store.writeResidue(record(3), 0)).rejects.toSatisfy((e: unknown) =>
        isLeafError(e, ErrorCodes.INVALID_ARGUMENT),
      );
      await expect(store.writeResidue({ ...record(3), remainder: 2 }, 2)).rejects.toThrow(
        /remainder 2 is not 0 \.\. 1/,
      );
      const rows = await query(
        d!,
        "SELECT delta, remainder, state, version FROM leaf_alloc_residue",
      );
      expect(rows).toEqual([{ delta: 2, remainder: 1, state: "active", version: "2" }]);
      const shipped = readFileSync(
        join(import.meta.dirname, "..", "sql", "leaf_alloc_residue.sql"),
        "utf8",
      );
      expect(shipped).toContain(`${residueSchema()};\n`);
    } finally {
      await store.close();
    }
  });

  it("refuses a record of a table without the members column (not made by this version of the store), and changes nothing", async () => {
    const [d] = await databases(["a"]);
    await query(
      d!,
      `CREATE TABLE leaf_alloc_residue (id smallint NOT NULL DEFAULT 1, set_id varchar(64) NOT NULL, member_id varchar(64) NOT NULL, epoch integer NOT NULL, delta integer NOT NULL, remainder integer NOT NULL, state varchar(16) NOT NULL, version bigint NOT NULL, update_time timestamptz NOT NULL DEFAULT CURRENT_TIMESTAMP, PRIMARY KEY (id));
       INSERT INTO leaf_alloc_residue (set_id, member_id, epoch, delta, remainder, state, version) VALUES ('set-1', 'member-1', 0, 1, 0, 'active', 1)`,
    );
    await expect(form([d!])).rejects.toSatisfy(
      (e: unknown) =>
        isLeafError(e, ErrorCodes.CORRUPT_DATA) &&
        /no members .*not a record written by this version of the store/.test(String(e)),
    );
    expect(
      await query(d!, "SELECT member_id, epoch, state, version FROM leaf_alloc_residue"),
    ).toEqual([{ member_id: "member-1", epoch: 0, state: "active", version: "1" }]);
    expect(
      await query(
        d!,
        "SELECT 1 FROM information_schema.columns WHERE table_name = 'leaf_alloc_residue' AND column_name = 'members'",
      ),
    ).toEqual([]);
  });

  it("keeps one writer of many racing from the same version", async () => {
    const [d] = await databases(["a"]);
    const stores = Array.from({ length: 6 }, () => storeOf(d!));
    try {
      expect(await stores[0]!.writeResidue(record(1), null)).toBe(true);
      const won = await Promise.all(
        stores.map((s, i) =>
          s.writeResidue(
            { ...record(2), memberId: `member-${i}`, members: ["member-a", `member-${i}`] },
            1,
          ),
        ),
      );
      expect(won.filter(Boolean)).toHaveLength(1);
      const winner = won.indexOf(true);
      expect((await stores[0]!.readResidue())?.memberId).toBe(`member-${winner}`);
    } finally {
      for (const s of stores) await s.close();
    }
  });
});

/** One generator standing for one server process: its own residue store and pools. */
interface Taker {
  generator: SegmentIdGenerator;
  ids: IdLog;
  /** ids of the residue class `remainder` of 2 (or 3) counted since the last reset. */
  byClass: Map<string, number>;
  errors: number;
}

async function taker(list: Database[]): Promise<Taker> {
  const generator = new SegmentIdGenerator({
    store: residueStore(list),
    dynamicStep: false,
    refreshIntervalMs: 1_000,
    retry: { initialMs: 20, maxMs: 200 },
  });
  await generator.start();
  return { generator, ids: new IdLog(), byClass: new Map(), errors: 0 };
}

/** Takes ids from every taker until stopped, as a busy server does; failures are counted. */
function drive(takers: Taker[], stride: () => bigint) {
  let running = true;
  const loop = async (t: Taker) => {
    while (running) {
      try {
        for (const id of await t.generator.nextIds("t", 20)) {
          t.ids.push(id);
          const key = `${id % stride()}`;
          t.byClass.set(key, (t.byClass.get(key) ?? 0) + 1);
        }
      } catch {
        t.errors++;
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

const total = (takers: Taker[]) => takers.reduce((n, t) => n + t.ids.count, 0);

describe("a residue set over two PostgreSQL servers", () => {
  it("keeps serving through a kill, a pause and a cut of either database, with no id twice", async () => {
    const list = await databases(["a", "b"]);
    await form(list);
    const admin = residueStore(list);
    await admin.createTag({ tag: "t", step: 1_000, startId: 1n });
    await admin.close();
    // One taker asks a first, the other b: both databases serve before the faults.
    const takers = [await taker(list), await taker([list[1]!, list[0]!])];
    const load = drive(takers, () => 2n);
    const report: string[] = [];
    try {
      await waitUntil("10,000 ids", () => total(takers) > 10_000);
      const faults: [string, (s: Server) => unknown, (s: Server) => unknown][] = [
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
          for (const t of takers) t.byClass.clear();
          const before = total(takers);
          // Ids keep coming from the other database: 2,000 more per taker, of its class.
          await waitUntil(`2,000 ids per taker from ${list[up]!.server.name}`, () =>
            takers.every((t) => (t.byClass.get(String(up)) ?? 0) > 2_000),
          );
          report.push(`${fault} ${server.name}: ${total(takers) - before} ids`);
          await undo(server);
        }
      }
      await load.stop();
      // Both back: each database serves a new taker that asks it first.
      for (const [first, remainder] of [
        [list, 0n],
        [[list[1]!, list[0]!], 1n],
      ] as const) {
        const t = await taker([...first]);
        for (let i = 0; i < 100; i++) t.ids.push(await t.generator.nextId("t"));
        expect([...t.ids.values()].every((id) => id % 2n === remainder)).toBe(true);
        await t.generator.close();
        takers.push(t);
      }
      const count = countRepeatedIds(takers.map((t) => t.ids));
      console.log(
        `PostgreSQL residue set under faults: ${count.total} ids, ${count.duplicates} twice; ${report.join("; ")}`,
      );
      expect(count.duplicates).toBe(0);
    } finally {
      await load.stop();
      for (const t of takers) await t.generator.close();
    }
  }, 300_000);

  it("adds a third database under load (2 to 3): new ranges above every id handed out, no id twice", async () => {
    const list = await databases(["a", "b", "c"]);
    const [a, b, c] = list as [Database, Database, Database];
    await form([a, b]);
    const admin = residueStore([a, b]);
    await admin.createTag({ tag: "t", step: 600, startId: 1n });
    await admin.close();
    // Both takers draw from b: a stays far behind, which is the case the raise is for.
    const takers = [await taker([b, a]), await taker([b, a])];
    let stride = 2n;
    const load = drive(takers, () => stride);
    try {
      await waitUntil("10,000 ids", () => total(takers) > 10_000);
      const grown = await form(list);
      stride = 3n;
      expect(grown).toMatchObject({ epoch: 1, unchanged: false });
      load.add(await taker([c, a, b]));
      load.add(await taker([a, b, c]));
      const before = takers.map((t) => t.ids.count);
      await waitUntil("3,000 more ids per taker", () =>
        takers.every((t, i) => t.ids.count > (before[i] ?? 0) + 3_000),
      );
      await load.stop();
      const count = countRepeatedIds(takers.map((t) => t.ids));
      console.log(
        `PostgreSQL 2 to 3 under load: ${count.total} ids, ${count.duplicates} twice, R = ${grown.startsAt.get("t")}`,
      );
      expect(count.duplicates).toBe(0);
      const R = grown.startsAt.get("t")!;
      for (const t of takers.slice(2)) {
        expect([...t.ids.values()].filter((id) => id < R)).toEqual([]);
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
