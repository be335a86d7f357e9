// A node's high-water file: marks of tags named like Object.prototype's members survive a restart,
// the highest max id the node read in each row (at a refresh) judges a row moved back below other
// nodes' ranges, and a full disk costs one load's ids rather than one per retry. Generators on one
// shared in-memory table stand for nodes on one database; each has its own data folder, and a
// restart is a new generator (and store instance) on the same folder and table.
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ErrorCodes, isLeafError } from "@leaf/core";
import { countDuplicates } from "@leaf/testkit";
import { afterAll, describe, expect, it } from "vitest";
import {
  HIGH_WATER_FILE,
  HighWaterMarks,
  MemorySegmentData,
  MemorySegmentStore,
  SegmentIdGenerator,
} from "../src/index";

const dirs: string[] = [];
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

function folder(): string {
  const dir = mkdtempSync(join(tmpdir(), "leaf-hw-marks-"));
  dirs.push(dir);
  return dir;
}

async function table(tags: string[], step = 100): Promise<MemorySegmentData> {
  const data = new MemorySegmentData();
  const store = new MemorySegmentStore({ data });
  for (const tag of tags) await store.createTag({ tag, step, startId: 1n });
  return data;
}

/** A node: a generator on `data` keeping its marks in `dir`. */
function node(data: MemorySegmentData, dir: string, refreshIntervalMs = 60_000, giveBack = false) {
  return new SegmentIdGenerator({
    store: new MemorySegmentStore({ data }),
    highWater: { dir, storeId: "memory" },
    refreshIntervalMs,
    dynamicStep: false,
    loadOnStart: false,
    giveBackOnClose: giveBack,
    prefetch: { maxDepth: 1 },
  });
}

/** Up to `n` ids of `tag` from `g`, counting refusals (CORRUPT_DATA) instead of ids. */
async function draw(g: SegmentIdGenerator, tag: string, n: number) {
  const ids: bigint[] = [];
  let refused = 0;
  for (let i = 0; i < n; i++) {
    try {
      ids.push(await g.nextId(tag));
    } catch (error) {
      if (!isLeafError(error, ErrorCodes.CORRUPT_DATA)) throw error;
      refused++;
    }
  }
  return { ids, refused };
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe("tags named like Object.prototype's members", () => {
  const tags = ["__proto__", "constructor", "hasOwnProperty", "toString"];

  it("keeps their marks in the file and reads them back", async () => {
    const dir = folder();
    const marks = new HighWaterMarks({ dir, storeId: "s" });
    await marks.open();
    for (const [i, tag] of tags.entries()) await marks.raise(tag, BigInt(1000 + i));
    await marks.observe(tags.map((tag, i) => ({ tag, maxId: BigInt(2000 + i) })));
    await marks.close();
    const file = JSON.parse(readFileSync(join(dir, HIGH_WATER_FILE), "utf8"));
    expect(Object.keys(file.stores.s).sort()).toEqual([...tags].sort());
    const again = new HighWaterMarks({ dir, storeId: "s" });
    await again.open();
    expect(tags.map((tag) => again.get(tag))).toEqual([1000n, 1001n, 1002n, 1003n]);
    expect(tags.map((tag) => again.seenOf(tag))).toEqual([2000n, 2001n, 2002n, 2003n]);
    await again.close();
  });

  it("refuses a tag named __proto__ after its max id moved back and the node restarted", async () => {
    const data = await table(tags);
    const dir = folder();
    const first = node(data, dir);
    await first.start();
    const before = await Promise.all(tags.map((tag) => draw(first, tag, 250)));
    await first.close();
    for (const row of data.rows.values()) row.maxId = 1n;
    const second = node(data, dir);
    await second.start();
    const after = await Promise.all(tags.map((tag) => draw(second, tag, 250)));
    await second.close();
    for (const [i, tag] of tags.entries()) {
      const count = countDuplicates([before[i]!.ids, after[i]!.ids]);
      expect({ tag, duplicates: count.duplicates, refused: after[i]!.refused }).toEqual({
        tag,
        duplicates: 0,
        refused: 250,
      });
    }
  });
});

describe("a node started just as max_id moves back", () => {
  it("is refused without moving max_id, and serves again once the row is fixed, with no restart", async () => {
    const data = await table(["t"]);
    const dir = folder();
    const first = node(data, dir);
    await first.start();
    const before = await draw(first, "t", 250);
    await first.close();
    const fixed = data.rows.get("t")!.maxId;
    // The start's refresh reads a healthy row; the row moves back before the first range.
    const second = node(data, dir, 20);
    await second.start();
    data.rows.get("t")!.maxId = 1n;
    const refused = await draw(second, "t", 20);
    // The store was given the node's mark: it refused without taking [1, 101).
    expect({ refused: refused.refused, maxId: data.rows.get("t")!.maxId }).toEqual({
      refused: 20,
      maxId: 1n,
    });
    expect(second.snapshot("t")!.refused?.message).toMatch(/its high-water mark/);
    data.rows.get("t")!.maxId = fixed;
    await sleep(200);
    const after = await draw(second, "t", 250);
    await second.close();
    expect(after.refused).toBe(0);
    expect(countDuplicates([before.ids, after.ids]).duplicates).toBe(0);
    expect(after.ids[0]).toBe(fixed);
  });
});

/** A node as `node`, giving back on close, its errors collected; `loadOnStart` on by default. */
function eager(
  data: MemorySegmentData,
  dir: string,
  refreshIntervalMs = 60_000,
  giveBack = true,
  loadOnStart = true,
) {
  const errors: unknown[] = [];
  const g = new SegmentIdGenerator({
    store: new MemorySegmentStore({ data }),
    highWater: { dir, storeId: "memory" },
    refreshIntervalMs,
    dynamicStep: false,
    loadOnStart,
    giveBackOnClose: giveBack,
    prefetch: { maxDepth: 1 },
    onError: (error) => errors.push(error),
  });
  return { g, errors };
}

describe("give-backs and the marks they leave (found by an attacker subagent)", () => {
  it("a node that loaded a range and served none of it lowers its mark to where it stood: two chained give-backs refuse nothing", async () => {
    const data = await table(["t"]);
    const [dirA, dirB] = [folder(), folder()];
    const a = eager(data, dirA).g;
    await a.start();
    const ids = (await draw(a, "t", 5)).ids;
    const b = eager(data, dirB).g;
    await b.start(); // loads [101, 201), serves nothing
    // B gives back [101, 201) first, then A gives back [6, 101): the row ends at 6.
    await b.close();
    await a.close();
    expect(data.rows.get("t")!.maxId).toBe(6n);
    const again = node(data, dirB, 20);
    await again.start();
    const after = await draw(again, "t", 20);
    await again.close();
    // Before: B's mark stayed at 101, above the row, and B refused the tag with nothing wrong.
    expect({
      refused: after.refused,
      duplicates: countDuplicates([ids, after.ids]).duplicates,
    }).toEqual({
      refused: 0,
      duplicates: 0,
    });
  });

  it("a gap too wide to skip below the max id it read is served again once the row is at or above it, with no restart", async () => {
    const step = 1_500_000_000;
    const data = await table(["t"], step);
    const [dirN, dirM] = [folder(), folder()];
    const n = eager(data, dirN, 50, false).g;
    await n.start();
    const served: Array<{ start: bigint; end: bigint }> = [await n.nextRange("t", 10)];
    const m = eager(data, dirM, 50).g;
    await m.start();
    served.push(await m.nextRange("t", 200_000_000), await m.nextRange("t", 1));
    await sleep(300); // m's next range loaded ahead; n reads the row
    await m.close(); // gives back more than one range can skip
    let refused: unknown;
    for (let i = 0; i < 3 && refused === undefined; i++) {
      try {
        served.push(await n.nextRange("t", 2_000_000_000));
      } catch (error) {
        refused = error;
      }
    }
    expect(isLeafError(refused, ErrorCodes.CORRUPT_DATA)).toBe(true);
    expect((refused as Error).message).toMatch(/Ids resume once a refresh finds the row fixed/);
    data.rows.get("t")!.maxId = 20_000_000_000n;
    await sleep(300);
    served.push(await n.nextRange("t", 5));
    await n.close();
    const ids = served
      .map((r) => ({ start: r.start, end: r.end }))
      .sort((x, y) => (x.start < y.start ? -1 : 1));
    for (let i = 1; i < ids.length; i++)
      expect(ids[i]!.start).toBeGreaterThanOrEqual(ids[i - 1]!.end);
    expect(served.at(-1)!.start).toBe(20_000_000_000n);
  });

  it("skips below the max id it read on a tag's first range without asking the store for a range of 0 ids", async () => {
    const data = await table(["t"]);
    const b = eager(data, folder()).g;
    await b.start();
    const ids = (await draw(b, "t", 100)).ids;
    // A starts while B's range ahead is taken (it reads max_id 201) and loads the tag lazily.
    const a = eager(data, folder(), 60_000, false, false);
    await a.g.start();
    await b.close(); // gives back [101, 201): the row is at 101 again
    ids.push(...(await draw(a.g, "t", 150)).ids);
    await a.g.close();
    expect(countDuplicates([ids]).duplicates).toBe(0);
    expect(a.errors.filter((e) => isLeafError(e, ErrorCodes.INVALID_ARGUMENT))).toEqual([]);
  });
});

describe("the highest max id a node read in the row", () => {
  /**
   * A and B take ranges, then only A (B idle); B refreshes `bRefreshes` times after A's last range;
   * both stop (no give-back), max_id is set to B's own mark, both restart and serve.
   */
  async function movedBackToB(bSeesA: boolean) {
    const data = await table(["t"]);
    const [dirA, dirB] = [folder(), folder()];
    let a = node(data, dirA, 60_000);
    let b = node(data, dirB, 20);
    await Promise.all([a.start(), b.start()]);
    const ids: bigint[][] = [];
    for (let i = 0; i < 3; i++) {
      ids.push((await draw(a, "t", 150)).ids, (await draw(b, "t", 150)).ids);
    }
    const markB = b.highWaterMarks().get("t")!;
    if (!bSeesA) {
      await b.close();
      b = node(data, dirB, 60_000);
    }
    ids.push((await draw(a, "t", 450)).ids);
    const markA = a.highWaterMarks().get("t")!;
    if (bSeesA) await sleep(200);
    await Promise.all([a.close(), b.close()]);
    data.rows.get("t")!.maxId = markB;
    a = node(data, dirA, 20);
    b = node(data, dirB, 20);
    await Promise.all([a.start(), b.start()]);
    const afterB = await draw(b, "t", 300);
    // A refused the row below its mark at start; a refresh after B's skip finds it above.
    await sleep(100);
    const afterA = await draw(a, "t", 300);
    await Promise.all([a.close(), b.close()]);
    const before = new Set(ids.flat());
    ids.push(afterA.ids, afterB.ids);
    return { count: countDuplicates(ids), markA, markB, refusedA: afterA.refused, afterB, before };
  }

  it("skips other nodes' ranges it read at a refresh: max_id set back to the lower node's mark", async () => {
    const { count, markA, refusedA, afterB } = await movedBackToB(true);
    expect(count.duplicates).toBe(0);
    // B serves above A's ranges; A, whose mark B's skip passed, serves again (refused meanwhile).
    expect(afterB.ids[0]! >= markA).toBe(true);
    expect(refusedA).toBe(0);
  });

  it("cannot know ranges taken after its last read: those ids repeat (the documented window)", async () => {
    const { count, markA, markB, afterB, before } = await movedBackToB(false);
    expect(afterB.refused).toBe(0);
    const repeated = afterB.ids.filter((id) => before.has(id));
    expect(count.duplicates).toBe(repeated.length);
    expect(repeated.length).toBeGreaterThan(0);
    // Every id twice lies between B's knowledge (its own mark: it read nothing later) and A's mark.
    expect(repeated.filter((id) => id < markB || id >= markA)).toEqual([]);
  });

  it("keeps serving when another node gave ids back at a graceful stop (a gap, no refusal)", async () => {
    const data = await table(["t"]);
    const [dirA, dirB] = [folder(), folder()];
    const a = node(data, dirA, 60_000, true);
    let b = node(data, dirB, 20);
    await Promise.all([a.start(), b.start()]);
    const ids = [(await draw(b, "t", 150)).ids];
    await sleep(50);
    ids.push((await draw(a, "t", 10)).ids);
    const seen = data.rows.get("t")!.maxId;
    await sleep(200);
    expect(b.highWaterMarks().get("t")! < seen).toBe(true);
    await a.close();
    expect(a.giveBackReport()[0]?.outcome).toBe("given-back");
    await b.close();
    b = node(data, dirB);
    await b.start();
    const after = await draw(b, "t", 300);
    await b.close();
    ids.push(after.ids);
    expect(after.refused).toBe(0);
    expect(after.ids[0]! >= seen).toBe(true);
    expect(countDuplicates(ids).duplicates).toBe(0);
  });

  it("a give-back lowers the node's own observed max id, so its restart uses the ids it gave back", async () => {
    const data = await table(["t"]);
    const dir = folder();
    let a = node(data, dir, 20, true);
    await a.start();
    const first = await draw(a, "t", 10);
    await sleep(100);
    await a.close();
    expect(data.rows.get("t")!.maxId).toBe(11n);
    a = node(data, dir);
    await a.start();
    const second = await draw(a, "t", 10);
    await a.close();
    expect(second.ids[0]).toBe(11n);
    expect(countDuplicates([first.ids, second.ids]).duplicates).toBe(0);
  });
});

describe("a gap wider than one range can cover", () => {
  it("refuses the tag (CORRUPT_DATA, below-observed-max-id) after taking one range, serving none of it", async () => {
    const data = await table(["t"]);
    const dir = folder();
    const marks = new HighWaterMarks({ dir, storeId: "memory" });
    await marks.open();
    await marks.observe([{ tag: "t", maxId: 10_000_000_000n }]);
    await marks.close();
    const g = node(data, dir);
    await g.start();
    const error = await g.nextId("t").catch((e: unknown) => e);
    await g.close();
    expect(isLeafError(error, ErrorCodes.CORRUPT_DATA)).toBe(true);
    expect((error as { details: { reason: string } }).details.reason).toBe("below-observed-max-id");
    expect(data.rows.get("t")!.maxId).toBe(101n);
  });
});

describe("a full disk", () => {
  it("writes the taken range's end again on retry instead of taking a range per retry", async () => {
    const mount = folder();
    execFileSync("mount", ["-t", "tmpfs", "-o", "size=64k", "tmpfs", mount]);
    try {
      const data = await table(["t"], 1000);
      const dir = join(mount, "data");
      mkdirSync(dir);
      const g = new SegmentIdGenerator({
        store: new MemorySegmentStore({ data }),
        highWater: { dir, storeId: "memory" },
        giveBackOnClose: false,
        retry: { initialMs: 5, maxMs: 20 },
        exhaustedWaitMs: 50,
      });
      await g.start();
      const ids = [(await draw(g, "t", 1500)).ids];
      try {
        execFileSync("dd", ["if=/dev/zero", `of=${join(mount, "filler")}`, "bs=4k"], {
          stdio: "ignore",
        });
      } catch {
        // dd stops at ENOSPC: the disk is full.
      }
      const full = data.rows.get("t")!.maxId;
      let failed = 0;
      // Bounded: a write that never fails must fail this test, not run it out of memory.
      for (let n = 0; failed < 20 && n < 100_000; n++) {
        try {
          ids.push([await g.nextId("t")]);
        } catch (error) {
          expect(isLeafError(error, ErrorCodes.SEGMENTS_EXHAUSTED)).toBe(true);
          failed++;
        }
      }
      const afterFull = data.rows.get("t")!.maxId;
      expect(failed).toBe(20);
      expect(g.snapshot("t")!.loadFailures).toBeGreaterThan(3);
      // One range taken while the disk was full, written again at every retry.
      expect(afterFull - full).toBeLessThanOrEqual(1000n);
      rmSync(join(mount, "filler"));
      ids.push((await draw(g, "t", 1500)).ids);
      await g.close();
      expect(countDuplicates(ids).duplicates).toBe(0);
    } finally {
      await unmount(mount);
    }
  });
});

/**
 * Unmounts `mount`, waiting up to 3 s for handles closed just now (a loaded machine can be slow to
 * let the kernel see the last close); a handle still open then is a leak, and fails the test with
 * this process's files inside the mount listed.
 */
async function unmount(mount: string): Promise<void> {
  for (let attempt = 0; ; attempt++) {
    try {
      execFileSync("umount", [mount], { stdio: "pipe" });
      return;
    } catch (error) {
      if (attempt >= 30) {
        const open = readdirSync("/proc/self/fd")
          .map((fd) => {
            try {
              return readlinkSync(`/proc/self/fd/${fd}`);
            } catch {
              return "";
            }
          })
          .filter((target) => target.startsWith(mount));
        throw new Error(
          `umount ${mount} failed (${(error as Error).message.trim()}); this process's open files there: ${open.join(", ") || "none"}`,
        );
      }
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
}
