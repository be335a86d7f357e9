// The prefetch depth: ranges kept ready ahead of the current one. It grows while ranges go faster
// than a few loads (a burst) or a request finds no id ready, shrinks when ranges outlast many
// loads, stays within 1 .. maxDepth, fills its gap in one round trip, and leaves Leaf's
// dynamic-step rule (15 / 30 minutes per range) as it was. Range times come from a ManualClock, so
// each step is exact.
import { ErrorCodes, ManualClock } from "@leaf/core";
import { afterEach, describe, expect, it } from "vitest";
import {
  MemorySegmentStore,
  type SegmentGeneratorOptions,
  SegmentIdGenerator,
  type SegmentRange,
} from "../src/index";

/** A memory store that records every range it hands out (the real store, observed). */
class RecordingStore extends MemorySegmentStore {
  readonly taken: SegmentRange[] = [];
  override async takeRange(tag: string, step?: number): Promise<SegmentRange> {
    const range = await super.takeRange(tag, step);
    this.taken.push(range);
    return range;
  }
}

const generators: SegmentIdGenerator[] = [];
afterEach(async () => {
  for (const g of generators.splice(0)) await g.close();
});

async function started(step: number, options: Partial<SegmentGeneratorOptions> = {}) {
  const store = new RecordingStore();
  await store.createTag({ tag: "t", step, startId: 0n });
  const clock = new ManualClock();
  const generator = new SegmentIdGenerator({ store, clock, dynamicStep: false, ...options });
  generators.push(generator);
  await generator.start();
  return { generator, store, clock };
}

/** Lets every load in flight finish (the memory store answers within a few turns). */
async function settle(generator: SegmentIdGenerator): Promise<void> {
  for (let i = 0; i < 50 && generator.snapshot("t")?.loading; i++) {
    await new Promise((resolve) => setImmediate(resolve));
  }
  expect(generator.snapshot("t")?.loading).toBe(false);
}

/** Uses up the current range with the sync path (no request waits), then lets loads finish. */
async function useCurrentRange(generator: SegmentIdGenerator): Promise<bigint[]> {
  const snap = generator.snapshot("t")!;
  const current = snap.segments[snap.currentPos]!;
  const ids: bigint[] = [];
  for (let id = current.value; id < current.max - 1n; id++) ids.push(generator.nextIdSync("t"));
  // The preload point was crossed on the way: its load finishes before the range is used up.
  await settle(generator);
  ids.push(generator.nextIdSync("t"));
  // The first id of the next range: the switch, where the depth is judged.
  ids.push(generator.nextIdSync("t"));
  await settle(generator);
  return ids;
}

function expectConsecutive(ids: bigint[], from: bigint): void {
  expect(ids).toEqual(ids.map((_, i) => from + BigInt(i)));
}

describe("prefetch depth", () => {
  it("keeps Leaf's double buffer while each range lasts many loads", async () => {
    const { generator, store, clock } = await started(100);
    const ids: bigint[] = [];
    for (let i = 0; i < 10; i++) {
      clock.advance(60_000);
      ids.push(...(await useCurrentRange(generator)));
      // Just after a switch, the next range is not loaded yet: it is, once 10% is used.
      expect(generator.snapshot("t")).toMatchObject({ depth: 1, rangesAhead: 0 });
    }
    expectConsecutive(ids, 0n);
    // One range per round trip, each of the table's step.
    expect(store.taken.every((r) => r.step === 100)).toBe(true);
  });

  it("deepens in a burst up to maxDepth and never beyond, filling the gap in one round trip", async () => {
    const { generator, store } = await started(100, { prefetch: { maxDepth: 4 } });
    const depths: number[] = [];
    const ids: bigint[] = [];
    // The clock stands still: every range lasts less than a load (a burst).
    for (let i = 0; i < 12; i++) {
      ids.push(...(await useCurrentRange(generator)));
      const snap = generator.snapshot("t")!;
      depths.push(snap.depth);
      expect(snap.rangesAhead).toBeLessThanOrEqual(snap.depth);
    }
    expect(Math.max(...depths)).toBe(4);
    expect(generator.snapshot("t")).toMatchObject({ depth: 4, rangesAhead: 4, starvations: 0 });
    // Depth only ever went up by one per switch, and stopped at 4.
    for (let i = 1; i < depths.length; i++) {
      expect(depths[i]! - depths[i - 1]!).toBeLessThanOrEqual(1);
      expect(depths[i]!).toBeGreaterThanOrEqual(depths[i - 1]!);
    }
    expectConsecutive(ids, 0n);
    // Some loads brought several ranges in one round trip: fewer round trips than ranges.
    const ranges = 1 + 12 + 4;
    expect(store.taken.length).toBeLessThan(ranges);
    expect(store.taken.some((r) => r.step > 100)).toBe(true);
  });

  it("shrinks back to one range ahead once ranges last long again, and not below", async () => {
    const { generator, clock } = await started(100, { prefetch: { maxDepth: 4 } });
    for (let i = 0; i < 8; i++) await useCurrentRange(generator);
    expect(generator.snapshot("t")!.depth).toBe(4);
    const depths: number[] = [];
    for (let i = 0; i < 6; i++) {
      clock.advance(60_000);
      await useCurrentRange(generator);
      depths.push(generator.snapshot("t")!.depth);
    }
    expect(depths).toEqual([3, 2, 1, 1, 1, 1]);
  });

  it("doubles the depth when a request finds no id ready, once per episode, bounded", async () => {
    const { generator } = await started(10, {
      preloadThreshold: 1,
      prefetch: { maxDepth: 3 },
    });
    const clock = (generator as unknown as { clock: ManualClock }).clock;
    const depths: number[] = [];
    for (let episode = 0; episode < 3; episode++) {
      clock.advance(60_000);
      const left = Number(generator.snapshot("t")!.idsLeft);
      for (let i = 0; i < left; i++) generator.nextIdSync("t");
      // Nothing ready: the sync path fails at once with -3, twice in the same episode, and the
      // async path waits for the load (a third request that found no id ready).
      for (let i = 0; i < 2; i++) {
        expect(() => generator.nextIdSync("t")).toThrow(
          expect.objectContaining({ code: ErrorCodes.SEGMENTS_EXHAUSTED }),
        );
      }
      await generator.nextId("t");
      await settle(generator);
      depths.push(generator.snapshot("t")!.depth);
    }
    const snap = generator.snapshot("t")!;
    expect(snap.starvations).toBe(9);
    expect(depths).toEqual([2, 3, 3]);
  });

  it("stays at one range ahead with prefetch: false, burst or not", async () => {
    const { generator, store } = await started(50, { prefetch: false });
    for (let i = 0; i < 10; i++) {
      await useCurrentRange(generator);
      expect(generator.snapshot("t")!.depth).toBe(1);
    }
    expect(store.taken.every((r) => r.step === 50)).toBe(true);
  });

  it("keeps Leaf's 15 / 30 minute rule per range when a load brings several ranges", async () => {
    const { generator, store, clock } = await started(10, {
      prefetch: { maxDepth: 4 },
      dynamicStep: { maxStep: 100_000, segmentDurationMs: 15 * 60_000 },
    });
    // A burst deepens the prefetch to 4 (ranges double meanwhile: each lasted no time at all).
    for (let i = 0; i < 8; i++) await useCurrentRange(generator);
    expect(generator.snapshot("t")!.depth).toBe(4);
    // Then each range lasts 20 minutes: between two loads of one range each, 20 minutes pass, and
    // a load after a deeper one is judged per range it brought. The step holds (15 <= 20 < 30).
    const before = generator.snapshot("t")!.step;
    const takenBefore = store.taken.length;
    for (let i = 0; i < 6; i++) {
      clock.advance(20 * 60_000);
      await useCurrentRange(generator);
    }
    expect(generator.snapshot("t")!.step).toBe(before);
    // Every round trip since took whole ranges of that step (one or several at once).
    const calm = store.taken.slice(takenBefore);
    expect(calm.length).toBeGreaterThan(0);
    expect(calm.every((r) => r.step % before === 0)).toBe(true);
    // 40 minutes per range: the step halves at each load.
    clock.advance(40 * 60_000);
    await useCurrentRange(generator);
    expect(generator.snapshot("t")!.step).toBe(before / 2);
  });
});
