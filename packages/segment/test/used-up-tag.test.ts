// A tag whose max_id nears 2^63 - 1: every id below the end is handed out, then the tag answers
// TAG_EXHAUSTED (Leaf code -3) at once and for good, with no retries against the store.
import { ErrorCodes, isLeafError, ManualClock } from "@leaf/core";
import { afterEach, describe, expect, it, vi } from "vitest";
import {
  MAX_ID,
  MemorySegmentStore,
  type SegmentGeneratorOptions,
  SegmentIdGenerator,
  type SegmentRange,
} from "../src/index";

/** A memory store that counts every takeRange call and records the ranges it hands out. */
class CountingStore extends MemorySegmentStore {
  readonly taken: SegmentRange[] = [];
  calls = 0;
  override async takeRange(tag: string, step?: number): Promise<SegmentRange> {
    this.calls++;
    const range = await super.takeRange(tag, step);
    this.taken.push(range);
    return range;
  }
}

const generators: SegmentIdGenerator[] = [];
afterEach(async () => {
  for (const g of generators.splice(0)) await g.close();
});

async function near(end: bigint, step: number, options: Partial<SegmentGeneratorOptions> = {}) {
  const store = new CountingStore();
  await store.createTag({ tag: "t", step, startId: end });
  const generator = new SegmentIdGenerator({
    store,
    dynamicStep: false,
    // A retry would be quick: the test sees whether one happens, not how long it takes.
    retry: { initialMs: 5, maxMs: 5 },
    refreshIntervalMs: 20,
    ...options,
  });
  generators.push(generator);
  await generator.start();
  return { generator, store };
}

const usedUp = (e: unknown) => isLeafError(e, ErrorCodes.TAG_EXHAUSTED) && e.leafCode === -3;

describe("a used-up tag", () => {
  it("hands out every id below the end, then answers TAG_EXHAUSTED on every path without retrying", async () => {
    // Two ranges of 10 fit below 2^63 - 1, with 5 ids left over that no range of 10 can hold.
    const { generator, store } = await near(MAX_ID - 25n, 10, { exhaustedWaitMs: 60_000 });
    const ids = await generator.nextIds("t", 20);
    expect(ids).toEqual(Array.from({ length: 20 }, (_, i) => MAX_ID - 25n + BigInt(i)));
    const errors = await Promise.all([
      generator.nextId("t").catch((e: unknown) => e),
      generator.nextIds("t", 3).catch((e: unknown) => e),
      generator.nextRange("t", 3).catch((e: unknown) => e),
    ]);
    expect(errors.every(usedUp)).toBe(true);
    expect(() => generator.nextIdSync("t")).toThrow(
      expect.objectContaining({ code: ErrorCodes.TAG_EXHAUSTED, leafCode: -3 }),
    );
    expect((errors[0] as Error).message).toMatch(
      /is used up: .*would pass 2\^63 - 1 \(5 ids left\)/,
    );
    expect(generator.snapshot("t")?.refused?.reason).toBe("exhausted");
    // Refreshes come and go (every 20 ms): the row still has no room, so no range is asked for.
    const calls = store.calls;
    const refreshes = generator.status().lastRefreshAt;
    await vi.waitFor(() => expect(generator.status().lastRefreshAt).not.toBe(refreshes), {
      timeout: 20_000,
    });
    await new Promise((r) => setTimeout(r, 100));
    expect(store.calls).toBe(calls);
    expect(() => generator.nextIdSync("t")).toThrow(
      expect.objectContaining({ code: "TAG_EXHAUSTED" }),
    );
  });

  it("answers TAG_EXHAUSTED to the first request of a tag that is used up before it is served", async () => {
    const { generator, store } = await near(MAX_ID - 3n, 10, { loadOnStart: false });
    const error = await generator.nextId("t").catch((e: unknown) => e);
    expect(usedUp(error)).toBe(true);
    expect(store.calls).toBe(1);
  });

  it("serves the tag again when its step is lowered so that a range fits", async () => {
    const { generator, store } = await near(MAX_ID - 5n, 10, { loadOnStart: false });
    expect(usedUp(await generator.nextId("t").catch((e: unknown) => e))).toBe(true);
    await store.updateStep("t", 5);
    await vi.waitFor(async () => expect(await generator.nextId("t")).toBe(MAX_ID - 5n), {
      timeout: 20_000,
    });
  });

  it("falls back to the table's step when a grown dynamic step no longer fits", async () => {
    const clock = new ManualClock();
    // Ranges of 10 fit until 2^63 - 1 - 5; the dynamic step would ask for 20 and then 40.
    const start = MAX_ID - 65n;
    const { generator, store } = await near(start, 10, {
      clock,
      preloadThreshold: 0,
      dynamicStep: { maxStep: 80, segmentDurationMs: 60_000 },
    });
    const served: bigint[] = [];
    for (;;) {
      clock.advance(1000);
      const id = await generator.nextId("t").catch((e: unknown) => e);
      if (typeof id !== "bigint") {
        expect(usedUp(id)).toBe(true);
        break;
      }
      served.push(id);
    }
    // Every id of every range taken was handed out, in order, and the last range ends within one
    // table step of the end.
    expect(served).toEqual(Array.from({ length: served.length }, (_, i) => start + BigInt(i)));
    const last = store.taken[store.taken.length - 1]!;
    expect(last.end).toBe(start + BigInt(served.length));
    expect(MAX_ID - last.end).toBeLessThan(10n);
    expect(store.taken.some((r) => r.step > 10)).toBe(true);
    expect(store.taken[store.taken.length - 1]!.step).toBe(10);
  });
});
