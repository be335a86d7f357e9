// A node's high-water marks on a real MariaDB: two generators stand for two servers, each with its
// own folder; max_id is moved back by hand while they are stopped, and after the restart every id
// is counted. With the marks the tag is refused with nothing taken; without them ids repeat.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ErrorCodes, isLeafError, type LeafError } from "@leaf/core";
import { HIGH_WATER_FILE, SegmentIdGenerator } from "@leaf/segment";
import { countDuplicates, type MysqlHandle, startMysql } from "@leaf/testkit";
import mysql from "mysql2/promise";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MysqlSegmentStore } from "../src/index";

let db: MysqlHandle;
let database: string;
let admin: mysql.Pool;
let tables = 0;
const dirs: string[] = [];

beforeAll(async () => {
  db = await startMysql({ useEnv: false });
  database = await db.createDatabase("segment_high_water");
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
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

function folder(): string {
  const dir = mkdtempSync(join(tmpdir(), "leaf-high-water-"));
  dirs.push(dir);
  return dir;
}

async function table(step: number): Promise<string> {
  const name = `leaf_alloc_hw_${tables++}`;
  const store = new MysqlSegmentStore({ url: db.urlFor(database), table: name });
  await store.createSchema();
  await store.close();
  await admin.query(`INSERT INTO ${name} (biz_tag, max_id, step) VALUES ('t', 1, ?)`, [step]);
  return name;
}

async function maxIdOf(name: string): Promise<bigint> {
  const [rows] = await admin.query<mysql.RowDataPacket[]>(`SELECT max_id FROM ${name}`);
  return BigInt(rows[0]!.max_id);
}

async function setMaxId(name: string, maxId: bigint): Promise<void> {
  await admin.query(`UPDATE ${name} SET max_id = ? WHERE biz_tag = 't'`, [maxId]);
}

/** A started generator on `name`, keeping marks in `dir` (none when undefined). */
async function node(name: string, dir: string | undefined): Promise<SegmentIdGenerator> {
  const generator = new SegmentIdGenerator({
    store: new MysqlSegmentStore({ url: db.urlFor(database), table: name }),
    dynamicStep: false,
    exhaustedWaitMs: 2_000,
    refreshIntervalMs: 600_000,
    retry: { initialMs: 10, maxMs: 50 },
    highWater: dir === undefined ? undefined : { dir, storeId: `mysql:${database}.${name}` },
  });
  await generator.start();
  return generator;
}

/** Draws `count` ids from each of `nodes` at once, interleaved. */
async function drawAll(nodes: SegmentIdGenerator[], count: number, ids: bigint[]): Promise<void> {
  await Promise.all(
    nodes.map(async (n) => {
      for (let i = 0; i < count; i++) {
        ids.push(await n.nextId("t"));
        if (i % 500 === 0) await new Promise((resolve) => setImmediate(resolve));
      }
    }),
  );
}

/** The error `nextId("t")` rejects with. */
async function refusal(generator: SegmentIdGenerator): Promise<LeafError> {
  const error = await generator.nextId("t").then(
    (id) => new Error(`expected a refusal, got id ${id}`),
    (e: unknown) => e,
  );
  if (!isLeafError(error)) throw error;
  return error;
}

describe("a restarted node remembers how far each tag went", () => {
  it("refuses a max_id moved back below its ranges, takes nothing, and serves again once the row is fixed", async () => {
    const name = await table(100);
    const [dirA, dirB] = [folder(), folder()];
    const ids: bigint[] = [];
    let a = await node(name, dirA);
    let b = await node(name, dirB);
    await drawAll([a, b], 5_000, ids);
    await Promise.all([a.close(), b.close()]);
    const before = await maxIdOf(name);
    // The graceful stop gave the unused ids back and lowered the marks to match: no false alarm.
    a = await node(name, dirA);
    b = await node(name, dirB);
    await drawAll([a, b], 2_000, ids);
    await Promise.all([a.close(), b.close()]);
    const handedOut = await maxIdOf(name);
    expect(handedOut).toBeGreaterThan(before);

    await setMaxId(name, 1n);
    a = await node(name, dirA);
    b = await node(name, dirB);
    for (const n of [a, b]) {
      const error = await refusal(n);
      expect(error.code).toBe(ErrorCodes.CORRUPT_DATA);
      expect(error.message).toContain('tag "t"');
      expect(error.message).toContain("its max id is 1 ");
      expect(error.details).toMatchObject({ reason: "max-id-moved-back", maxId: "1" });
      const mark = BigInt(error.details!.highWater as string);
      expect(error.message).toContain(`below ${mark}`);
      expect(mark).toBeGreaterThan(1n);
      expect(mark).toBeLessThanOrEqual(handedOut);
      expect(n.snapshot("t")!.refused?.reason).toBe("max-id-moved-back");
    }
    // Nothing was taken: the row is as the operator left it.
    expect(await maxIdOf(name)).toBe(1n);
    // Still refused at a refresh while the row stays behind.
    await a.refresh();
    expect((await refusal(a)).code).toBe(ErrorCodes.CORRUPT_DATA);

    await setMaxId(name, handedOut);
    await Promise.all([a.refresh(), b.refresh()]);
    await drawAll([a, b], 1_000, ids);
    await Promise.all([a.close(), b.close()]);
    expect(countDuplicates([ids]).duplicates).toBe(0);
    expect(ids.length).toBe(16_000);
  });

  it("without the marks, the same restart hands out the ids again (why they are kept)", async () => {
    const name = await table(100);
    const ids: bigint[] = [];
    let a = await node(name, undefined);
    let b = await node(name, undefined);
    await drawAll([a, b], 2_000, ids);
    await Promise.all([a.close(), b.close()]);
    await setMaxId(name, 1n);
    a = await node(name, undefined);
    b = await node(name, undefined);
    await drawAll([a, b], 2_000, ids);
    await Promise.all([a.close(), b.close()]);
    // The second run's ids start at 1 again: most of them repeat (gaps of given-back ranges aside).
    expect(countDuplicates([ids]).duplicates).toBeGreaterThan(2_000);
  });

  it("forgets a tag's mark when told to, and serves the tag again", async () => {
    const name = await table(100);
    const dir = folder();
    let a = await node(name, dir);
    await drawAll([a], 300, []);
    await a.close();
    await setMaxId(name, 1n);
    a = await node(name, dir);
    expect((await refusal(a)).code).toBe(ErrorCodes.CORRUPT_DATA);
    const forgotten = await a.forgetHighWater("t");
    expect(forgotten).toBe(301n);
    expect(await a.nextId("t")).toBe(1n);
    expect(a.highWaterMarks().get("t")).toBeGreaterThanOrEqual(101n);
    await a.close();
    const file = JSON.parse(readFileSync(join(dir, HIGH_WATER_FILE), "utf8"));
    expect(file.stores[`mysql:${database}.${name}`]).toEqual({ t: "2" });
  });

  it("keeps the marks of each store apart: another table starting at 1 is no false alarm", async () => {
    const [first, second] = [await table(100), await table(100)];
    const dir = folder();
    let a = await node(first, dir);
    await drawAll([a], 500, []);
    await a.close();
    a = await node(second, dir);
    expect(await a.nextId("t")).toBe(1n);
    await a.close();
    a = await node(first, dir);
    expect(await a.nextId("t")).toBe(501n);
    await a.close();
  });

  it("serves no range whose end could not be stored (fail closed)", async () => {
    const name = await table(100);
    const dir = folder();
    const a = await node(name, dir);
    const ids: bigint[] = [];
    ids.push(await a.nextId("t"));
    const stored = BigInt(
      JSON.parse(readFileSync(join(dir, HIGH_WATER_FILE), "utf8")).stores[
        `mysql:${database}.${name}`
      ].t,
    );
    // The folder is gone (a volume unmounted, a wrong cleanup job): no mark can be written.
    rmSync(dir, { recursive: true, force: true });
    let failure: unknown;
    for (;;) {
      try {
        ids.push(await a.nextId("t"));
      } catch (error) {
        failure = error;
        break;
      }
    }
    expect(isLeafError(failure, ErrorCodes.SEGMENTS_EXHAUSTED)).toBe(true);
    expect((failure as LeafError).message).toContain("high-water folder");
    // Every id handed out lies in ranges whose end was on disk before they were served.
    expect(ids.at(-1)!).toBeLessThan(stored);
    await a.close();
  });

  it("refuses to start on a damaged high-water file", async () => {
    const name = await table(100);
    const dir = folder();
    writeFileSync(join(dir, HIGH_WATER_FILE), "{not json");
    const error = await node(name, dir).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(isLeafError(error, ErrorCodes.CORRUPT_DATA)).toBe(true);
    expect((error as LeafError).message).toContain(HIGH_WATER_FILE);
  });
});
