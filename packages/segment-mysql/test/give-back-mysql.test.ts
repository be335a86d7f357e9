// Give-back on a graceful close, on a real MariaDB: two generators on one table, one closing with
// and without the other having taken a range after its own, and a restarted one; every id counted.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ErrorCodes, isLeafError } from "@leaf/core";
import {
  EmbeddedSegmentStore,
  type SegmentGeneratorOptions,
  SegmentIdGenerator,
} from "@leaf/segment";
import { type MysqlHandle, startMysql } from "@leaf/testkit";
import mysql from "mysql2/promise";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { MysqlSegmentStore } from "../src/index";

let db: MysqlHandle;
let database: string;
let admin: mysql.Pool;
let tables = 0;
const scratch = mkdtempSync(join(tmpdir(), "leaf-give-back-"));

beforeAll(async () => {
  db = await startMysql({ useEnv: false });
  database = await db.createDatabase("segment_give_back");
  admin = mysql.createPool({
    ...db.connectionOptions(database),
    connectionLimit: 2,
    supportBigNumbers: true,
    bigNumberStrings: true,
  });
}, 120_000);

afterAll(async () => {
  await admin?.end().catch(() => {});
  await db?.dispose();
  rmSync(scratch, { recursive: true, force: true });
});

/** A fresh leaf_alloc table holding tag "t" (max_id 1, the given step), and its name. */
async function table(step: number): Promise<string> {
  const name = `leaf_alloc_gb_${tables++}`;
  const store = new MysqlSegmentStore({ url: db.urlFor(database), table: name });
  await store.createSchema();
  await store.createTag({ tag: "t", step, startId: 1n });
  await store.close();
  return name;
}

async function maxIdOf(name: string): Promise<bigint> {
  const [rows] = await admin.query<mysql.RowDataPacket[]>(
    `SELECT max_id FROM ${name} WHERE biz_tag = 't'`,
  );
  return BigInt(rows[0]!.max_id);
}

/**
 * A started generator on `name`. By default one range per load, taken when the current one is used
 * up, so that which node takes which range is decided by the test.
 */
async function node(name: string, options: Partial<SegmentGeneratorOptions> = {}) {
  const generator = new SegmentIdGenerator({
    store: new MysqlSegmentStore({ url: db.urlFor(database), table: name }),
    dynamicStep: false,
    preloadThreshold: 1,
    prefetch: false,
    ...options,
  });
  await generator.start();
  return generator;
}

/** Records every id handed out, failing on the first one seen twice. */
class Ledger {
  readonly ids = new Set<bigint>();
  add(id: bigint): bigint {
    if (this.ids.has(id)) throw new Error(`id ${id} handed out twice`);
    this.ids.add(id);
    return id;
  }
  async draw(generator: SegmentIdGenerator, count: number): Promise<bigint[]> {
    const out: bigint[] = [];
    for (let i = 0; i < count; i++) out.push(this.add(await generator.nextId("t")));
    return out;
  }
}

describe("give-back on graceful close (MariaDB)", () => {
  it("gives the unused ids back when no other node took a range after its own: the restarted node loses none", async () => {
    const name = await table(100);
    const ledger = new Ledger();
    const a = await node(name); // [1, 101)
    const b = await node(name); // [101, 201)
    const fromA = await ledger.draw(a, 150); // 1..100, then [201, 301): 201..250
    expect(fromA.at(-1)).toBe(250n);
    await ledger.draw(b, 50); // 101..150
    expect(await maxIdOf(name)).toBe(301n);

    const closing = a.close();
    // Serving stopped in the same step as close() was called: no id can slip past the give-back.
    expect(() => a.nextIdSync("t")).toThrow(expect.objectContaining({ code: ErrorCodes.CLOSED }));
    await closing;
    expect(a.giveBackReport()).toEqual([
      { tag: "t", from: 251n, end: 301n, outcome: "given-back" },
    ]);
    expect(await maxIdOf(name)).toBe(251n);

    const restarted = await node(name);
    expect(ledger.add(await restarted.nextId("t"))).toBe(251n); // none lost
    await ledger.draw(restarted, 120);
    await ledger.draw(b, 120); // 151..200, then a range after the restarted node's
    await restarted.close();
    await b.close();
    expect(ledger.ids.size).toBe(150 + 50 + 121 + 120);
  }, 120_000);

  it("gives nothing back when another node took a range after its own, and no id repeats", async () => {
    const name = await table(100);
    const ledger = new Ledger();
    const a = await node(name); // [1, 101)
    const b = await node(name); // [101, 201): taken after a's range
    await ledger.draw(a, 50); // 1..50
    await a.close();
    const maxIdAfterClose = await maxIdOf(name);
    // Every id of both nodes and the restarted one is counted first: a give-back made regardless
    // of b's range would hand 101..150 out twice, and the ledger would throw here.
    const restarted = await node(name);
    const after = await ledger.draw(restarted, 150);
    await ledger.draw(b, 250); // 101..200 and on, past the restarted node's ranges
    await restarted.close();
    await b.close();
    expect(ledger.ids.size).toBe(50 + 150 + 250);
    // The compare-and-set saw max_id 201, not 101: nothing changed, ids 51..100 are a gap.
    expect(a.giveBackReport()).toEqual([
      { tag: "t", from: 51n, end: 101n, outcome: "taken-since" },
    ]);
    expect(maxIdAfterClose).toBe(201n);
    expect(after[0]).toBe(201n);
  }, 120_000);

  it("keeps every id unique across two busy nodes and ten graceful restarts of one, with the default prefetch", async () => {
    const name = await table(50);
    const ledger = new Ledger();
    const options = { preloadThreshold: 0.1, prefetch: true, dynamicStep: true };
    const b = await node(name, options);
    const settled = (g: SegmentIdGenerator) =>
      vi.waitFor(() => expect(g.snapshot("t")?.loading).toBe(false), { timeout: 20_000 });
    for (let round = 0; round < 10; round++) {
      const a = await node(name, options);
      for (let i = 0; i < 6; i++) {
        await ledger.draw(a, 37 + 11 * round);
        await ledger.draw(b, 23 + 7 * i);
      }
      // Even rounds: a takes the last range before closing (it uses up all it holds, plus one);
      // odd rounds: b does, after a's.
      const last = round % 2 === 0 ? a : b;
      await settled(a);
      await settled(b);
      await ledger.draw(last, Number(last.snapshot("t")!.idsLeft) + 1);
      await settled(last);
      await a.close();
      const [report] = a.giveBackReport();
      const maxId = await maxIdOf(name);
      if (round % 2 === 0) {
        expect(report).toMatchObject({ outcome: "given-back" });
        expect(maxId).toBe(report!.from);
      } else {
        expect(report).toMatchObject({ outcome: "taken-since" });
        expect(maxId).toBeGreaterThan(report!.end);
      }
    }
    await ledger.draw(b, 500);
    await b.close();
  }, 180_000);

  it("gives back a range that arrived while it was closing", async () => {
    const name = await table(100);
    const ledger = new Ledger();
    const a = await node(name);
    await ledger.draw(a, 100); // the range is used up
    // The next request starts a load; close() is called while it is in flight.
    const waiting = a.nextId("t").catch((e: unknown) => e);
    await a.close();
    expect(isLeafError(await waiting, ErrorCodes.CLOSED)).toBe(true);
    expect(a.giveBackReport()).toEqual([
      { tag: "t", from: 101n, end: 201n, outcome: "given-back" },
    ]);
    expect(await maxIdOf(name)).toBe(101n);
    const restarted = await node(name);
    expect(ledger.add(await restarted.nextId("t"))).toBe(101n);
    await restarted.close();
  }, 120_000);
});

describe("give-back on graceful close (embedded store)", () => {
  it("writes the give-back to the journal: the reopened store starts the next range at the first unused id", async () => {
    const dir = join(scratch, "embedded");
    const setup = new EmbeddedSegmentStore({ dir });
    await setup.createTag({ tag: "t", step: 1000, startId: 1n });
    await setup.close();
    const ledger = new Ledger();
    for (let restart = 0; restart < 5; restart++) {
      const generator = new SegmentIdGenerator({ store: new EmbeddedSegmentStore({ dir }) });
      await generator.start();
      const ids = await ledger.draw(generator, 777);
      await generator.close();
      expect(generator.giveBackReport()).toMatchObject([
        { tag: "t", from: ids.at(-1)! + 1n, outcome: "given-back" },
      ]);
    }
    // Five restarts, not an id lost: 1 .. 3885 in order.
    expect([...ledger.ids]).toEqual(Array.from({ length: 5 * 777 }, (_, i) => BigInt(i + 1)));
  }, 60_000);
});
