import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ErrorCodes, isLeafError, LeafCodes, ManualClock } from "@leaf/core";
import { countRepeatedIds, type MysqlHandle, runNode, startMysql } from "@leaf/testkit";
import mysql from "mysql2/promise";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";

/** Retries `check` until it passes; generous, since these machines are shared (not a speed bound). */
const eventually = <T>(check: () => T | Promise<T>) =>
  vi.waitFor(check, { timeout: 20_000, interval: 20 });

import { MAX_ID, type SegmentGeneratorOptions, SegmentIdGenerator } from "@leaf/segment";
import { MysqlSegmentStore } from "../src/index";

let db: MysqlHandle;
let database: string;
let admin: mysql.Pool;
let tables = 0;
const scratch = mkdtempSync(join(tmpdir(), "leaf-segment-mysql-"));

beforeAll(async () => {
  db = await startMysql({ useEnv: false });
  database = await db.createDatabase("segment_gen");
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
  rmSync(scratch, { recursive: true, force: true });
});

/** A fresh leaf_alloc-shaped table with the given rows (tag, max_id, step), and its name. */
async function table(rows: [string, bigint, number][]): Promise<string> {
  const name = `leaf_alloc_${tables++}`;
  const store = new MysqlSegmentStore({ url: db.urlFor(database), table: name });
  await store.createSchema();
  await store.close();
  for (const [tag, maxId, step] of rows) {
    await admin.query(`INSERT INTO ${name} (biz_tag, max_id, step) VALUES (?, ?, ?)`, [
      tag,
      maxId,
      step,
    ]);
  }
  return name;
}

async function generatorOn(name: string, options: Partial<SegmentGeneratorOptions> = {}) {
  const store = new MysqlSegmentStore({
    url: db.urlFor(database),
    table: name,
    queryTimeoutMs: 2_000,
    connectTimeoutMs: 2_000,
  });
  const generator = new SegmentIdGenerator({ store, dynamicStep: false, ...options });
  await generator.start();
  return { generator, store };
}

/**
 * Waits until tag t's next range is ready and no load is in flight. The prefetch may load several
 * ranges ahead: a load in flight when the database is paused or killed may have been answered
 * already, and its range would arrive after the test counted the ids left. (The CI run of 27 Nov
 * 06:35Z failed on the -3 test below; this race is the likeliest cause found: at the pause the
 * prefetch was seen 4 ranges deep.)
 */
async function settled(generator: SegmentIdGenerator): Promise<void> {
  await eventually(() =>
    expect(generator.snapshot("t")).toMatchObject({ nextReady: true, loading: false }),
  );
}

function expectIncreasing(ids: bigint[]): void {
  for (let i = 1; i < ids.length; i++) {
    if (ids[i]! <= ids[i - 1]!) throw new Error(`id ${ids[i]} at ${i} is not above ${ids[i - 1]}`);
  }
}

describe("SegmentIdGenerator on MariaDB", () => {
  it("gives two processes on one table 1,000,000 ids between them, none twice", async () => {
    const name = await table([["shared", 1n, 500]]);
    const outs = [join(scratch, "a.bin"), join(scratch, "b.bin")];
    const script = join(import.meta.dirname, "fixtures", "draw-ids.ts");
    const results = await Promise.all(
      outs.map((out) =>
        runNode(script, [db.urlFor(database), name, "shared", "500000", out], {
          timeoutMs: 100_000,
        }),
      ),
    );
    for (const r of results) expect(r.stdout + r.stderr).toContain("done 500000");
    const drawn = outs.map((out) => {
      const ids = new BigInt64Array(new Uint8Array(readFileSync(out)).buffer);
      expect(ids.length).toBe(500_000);
      expectIncreasing([...ids]);
      return ids;
    });
    const count = countRepeatedIds(drawn);
    expect({ duplicates: count.duplicates, examples: count.examples }).toEqual({
      duplicates: 0,
      examples: [],
    });
    const [rows] = await admin.query<mysql.RowDataPacket[]>(`SELECT max_id FROM ${name}`);
    expect(BigInt(rows[0]!.max_id)).toBeGreaterThan(count.sorted.at(-1)!);
  }, 120_000);

  it("keeps handing out loaded ids while the database is down, then -3, then resumes after restart", async () => {
    const name = await table([["t", 1n, 300]]);
    const { generator } = await generatorOn(name, {
      exhaustedWaitMs: 200,
      retry: { initialMs: 20, maxMs: 200 },
    });
    const ids: bigint[] = [];
    try {
      for (let i = 0; i < 100; i++) ids.push(await generator.nextId("t"));
      await settled(generator);
      const buffered = Number(generator.snapshot("t")!.idsLeft);
      await db.kill();
      let error: unknown;
      let afterKill = 0;
      for (;;) {
        try {
          ids.push(await generator.nextId("t"));
          afterKill++;
        } catch (e) {
          error = e;
          break;
        }
      }
      // Every buffered id was handed out, and the preload of the range after failed.
      expect(afterKill).toBe(buffered);
      expect(error).toSatisfy((e: unknown) => isLeafError(e, ErrorCodes.SEGMENTS_EXHAUSTED));
      expect((error as { leafCode: number }).leafCode).toBe(LeafCodes.SEGMENTS_EXHAUSTED);
      expect(generator.snapshot("t")!.loadFailures).toBeGreaterThan(0);
      expect(() => generator.nextIdSync("t")).toThrow(expect.objectContaining({ leafCode: -3 }));
      await db.start();
      await eventually(async () => ids.push(await generator.nextId("t")));
      for (let i = 0; i < 1000; i++) ids.push(await generator.nextId("t"));
      expectIncreasing(ids);
      expect(generator.snapshot("t")).toMatchObject({
        consecutiveFailures: 0,
        lastError: expect.any(String),
      });
    } finally {
      await generator.close();
    }
  }, 60_000);

  it("fails a request with -3 after the configured wait while the database hangs, and recovers", async () => {
    const name = await table([["t", 1n, 50]]);
    const { generator } = await generatorOn(name, {
      exhaustedWaitMs: 300,
      retry: { initialMs: 20, maxMs: 100 },
    });
    try {
      // Two ranges used up and 10 ids into the third: the fourth is preloaded.
      await generator.nextIds("t", 110);
      await settled(generator);
      db.pause();
      const drawn = await generator.nextIds("t", Number(generator.snapshot("t")!.idsLeft));
      await expect(generator.nextId("t")).rejects.toSatisfy((e: unknown) =>
        isLeafError(e, ErrorCodes.SEGMENTS_EXHAUSTED),
      );
      db.resume();
      const after = await eventually(() => generator.nextId("t"));
      expect(after).toBeGreaterThan(drawn[drawn.length - 1]!);
    } finally {
      db.resume();
      await generator.close();
    }
  }, 60_000);

  it("doubles and halves the step by how long ranges last, on a controllable clock", async () => {
    const name = await table([["t", 0n, 10]]);
    const clock = new ManualClock();
    const { generator, store } = await generatorOn(name, {
      clock,
      preloadThreshold: 0,
      dynamicStep: { maxStep: 40, segmentDurationMs: 15 * 60_000 },
    });
    const nextLoaded = () =>
      eventually(() => expect(generator.snapshot("t")?.nextReady).toBe(true));
    const maxId = async () => {
      const [rows] = await admin.query<mysql.RowDataPacket[]>(`SELECT max_id, step FROM ${name}`);
      return [BigInt(rows[0]!.max_id), Number(rows[0]!.step)];
    };
    try {
      generator.nextIdSync("t");
      await nextLoaded();
      const steps: number[] = [];
      for (const minutes of [1, 1, 1, 20, 40, 40, 40]) {
        clock.advance(minutes * 60_000);
        const snap = generator.snapshot("t")!;
        const current = snap.segments[snap.currentPos]!;
        await generator.nextIds("t", Number(current.max - current.value) + 1);
        await nextLoaded();
        steps.push(generator.snapshot("t")!.step);
      }
      // Loads: 10, 10 (the table's step twice, as Java Leaf: its update timestamp is set by the
      // second load), then per round 20, 40, 40 (1 min: doubled, capped), 40 (20 min: kept),
      // 20, 10, 10 (40 min: halved, down to the table's step).
      expect(steps).toEqual([20, 40, 40, 40, 20, 10, 10]);
      const [max, tableStep] = await maxId();
      expect(tableStep).toBe(10);
      expect(max).toBe(10n + 10n + 20n + 40n + 40n + 40n + 20n + 10n + 10n);
      expect(store.stats().rangesTaken).toBe(9);
    } finally {
      await generator.close();
    }
  });

  it("takes the table's step for the first two ranges and doubles from the third, as Java Leaf: max_id 4001 after 2100 ids", async () => {
    // Java Leaf's demo row, on the real clock and Leaf's own dynamic-step settings.
    const name = await table([["leaf-segment-test", 1n, 2000]]);
    // Leaf's double buffer (no deeper prefetch), as Java Leaf: 2,100 ids at once would deepen it.
    const { generator, store } = await generatorOn(name, { dynamicStep: true, prefetch: false });
    const maxId = async () => {
      const [rows] = await admin.query<mysql.RowDataPacket[]>(`SELECT max_id FROM ${name}`);
      return BigInt(rows[0]!.max_id);
    };
    try {
      const first = await generator.nextIds("leaf-segment-test", 2100);
      expect(first[0]).toBe(1n);
      expect(first[2099]).toBe(2100n);
      await eventually(() => expect(generator.snapshot("leaf-segment-test")?.loads).toBe(2));
      // Ranges [1, 2001) and [2001, 4001): Java Leaf's max_id after 2100 ids.
      expect(await maxId()).toBe(4001n);
      expect(generator.snapshot("leaf-segment-test")?.step).toBe(2000);
      // 10% into the second range the third load doubles the step (under 15 minutes since the second).
      await generator.nextIds("leaf-segment-test", 200);
      await eventually(() => expect(generator.snapshot("leaf-segment-test")?.loads).toBe(3));
      expect(await maxId()).toBe(8001n);
      expect(generator.snapshot("leaf-segment-test")?.step).toBe(4000);
      expect(store.stats().rangesTaken).toBe(3);
    } finally {
      await generator.close();
    }
  });

  it("after a restart takes first ranges by the load policy: every tag, only the hot ones, or the hot and recently served ones", async () => {
    // Hundreds of tags with large steps, last touched two days ago; two are configured as hot.
    const TAGS = 300;
    const STEP = 1_000_000;
    const hot = ["tag-000", "tag-001"];
    const served = Array.from(
      { length: 10 },
      (_, i) => `tag-${String(100 + i * 7).padStart(3, "0")}`,
    );
    const setUp = async () => {
      const name = await table([]);
      const values = Array.from(
        { length: TAGS },
        (_, i) => `('tag-${String(i).padStart(3, "0")}', 1, ${STEP}, NOW() - INTERVAL 2 DAY)`,
      );
      await admin.query(
        `INSERT INTO ${name} (biz_tag, max_id, step, update_time) VALUES ${values.join(", ")}`,
      );
      // The first run: Java Leaf's behaviour plus the hot tags; ten tags get requests.
      const { generator } = await generatorOn(name, { loadOnStart: { tags: hot } });
      for (const tag of served) await generator.nextId(tag);
      await generator.close();
      return name;
    };
    const rows = async (name: string) => {
      const [result] = await admin.query<mysql.RowDataPacket[]>(
        `SELECT biz_tag, max_id FROM ${name}`,
      );
      return new Map(result.map((r) => [String(r.biz_tag), BigInt(r.max_id)]));
    };
    /** Restarts on `name` with `loadOnStart` and answers the tags whose max_id moved at start. */
    const restart = async (name: string, loadOnStart: SegmentGeneratorOptions["loadOnStart"]) => {
      const before = await rows(name);
      const { generator, store } = await generatorOn(name, { loadOnStart });
      try {
        const after = await rows(name);
        const moved = [...after].filter(([tag, max]) => max !== before.get(tag)).map(([t]) => t);
        expect(store.stats().rangesTaken).toBe(moved.length);
        // A tag left for its first request starts where the table says, with no range lost.
        const idle = "tag-299";
        const lazy = !moved.includes(idle);
        if (lazy) expect(await generator.nextId(idle)).toBe(before.get(idle));
        return moved.sort();
      } finally {
        await generator.close();
      }
    };

    const everyTag = await restart(await setUp(), true);
    expect(everyTag).toHaveLength(TAGS);
    const hotOnly = await restart(await setUp(), { tags: hot });
    expect(hotOnly).toEqual(hot);
    const recent = await restart(await setUp(), { tags: hot, updatedWithinMs: 3_600_000 });
    expect(recent).toEqual([...hot, ...served].sort());
    const javaLeaf = await restart(await setUp(), false);
    expect(javaLeaf).toEqual([]);
  }, 120_000);

  it("serves a tag added to the table and drops tags removed, down to none, at each refresh", async () => {
    const name = await table([["a", 1n, 10]]);
    const { generator } = await generatorOn(name, { refreshIntervalMs: 50 });
    try {
      await admin.query(`INSERT INTO ${name} (biz_tag, max_id, step) VALUES ('b', 100, 10)`);
      await eventually(() => expect(generator.tags().sort()).toEqual(["a", "b"]));
      expect(await generator.nextId("b")).toBe(100n);
      await admin.query(`DELETE FROM ${name} WHERE biz_tag = 'a'`);
      await eventually(() => expect(generator.tags()).toEqual(["b"]));
      await expect(generator.nextId("a")).rejects.toSatisfy((e: unknown) =>
        isLeafError(e, ErrorCodes.UNKNOWN_TAG),
      );
      await admin.query(`DELETE FROM ${name}`);
      await eventually(() => expect(generator.tags()).toEqual([]));
      expect(() => generator.nextIdSync("b")).toThrow(
        expect.objectContaining({ code: ErrorCodes.UNKNOWN_TAG, leafCode: -2 }),
      );
    } finally {
      await generator.close();
    }
  });

  it("keeps ids above 2^53 exact, and refuses to pass 2^63 - 1", async () => {
    const big = 2n ** 53n - 10n;
    const name = await table([
      ["big", big, 7],
      ["edge", MAX_ID - 12n, 5],
    ]);
    const { generator } = await generatorOn(name, {
      exhaustedWaitMs: 100,
      retry: { initialMs: 1_000 },
    });
    try {
      const ids = await generator.nextIds("big", 40);
      expect(ids).toEqual(Array.from({ length: 40 }, (_, i) => big + BigInt(i)));
      expect(ids.map(String)).toContain("9007199254740993");
      const edge = await generator.nextIds("edge", 10);
      expect(edge[9]).toBe(MAX_ID - 3n);
      const error = await generator.nextId("edge").catch((e: unknown) => e);
      expect(error).toSatisfy((e: unknown) => isLeafError(e, ErrorCodes.TAG_EXHAUSTED));
      expect(generator.snapshot("edge")?.lastError).toMatch(/would pass 2\^63 - 1/);
    } finally {
      await generator.close();
    }
  });

  it("refuses to start, with a clear error, when the database cannot be reached", async () => {
    const store = new MysqlSegmentStore({
      url: `mysql://root@127.0.0.1:1/${database}`,
      connectTimeoutMs: 1_000,
    });
    const generator = new SegmentIdGenerator({ store });
    try {
      await expect(generator.start()).rejects.toSatisfy(
        (e: unknown) =>
          isLeafError(e, ErrorCodes.UNAVAILABLE) &&
          /could not start.*127\.0\.0\.1:1/.test((e as Error).message),
      );
      expect(generator.status().state).toBe("new");
    } finally {
      await generator.close();
    }
  });
});
