// The order guarantees segment ids keep (README "Order"): per node, a tag's ids only increase,
// across range switches, deeper prefetches and restarts (graceful or not); across nodes they trend
// upwards: every id of a range is above every id any node handed out before that range was taken.
import { afterEach, describe, expect, it } from "vitest";
import {
  MemorySegmentData,
  MemorySegmentStore,
  type SegmentGeneratorOptions,
  SegmentIdGenerator,
  type SegmentRange,
} from "../src/index";

/** Counts events across every node of a test: ranges taken and ids handed out, in order. */
class Timeline {
  seq = 0;
  readonly ranges: { range: SegmentRange; at: number }[] = [];
  readonly ids: { id: bigint; at: number; node: string }[] = [];
}

/** A memory store on shared rows (one table) that puts each range it hands out on the timeline. */
class TimelineStore extends MemorySegmentStore {
  constructor(
    data: MemorySegmentData,
    private readonly timeline: Timeline,
  ) {
    super({ data });
  }
  override async takeRange(tag: string, step?: number): Promise<SegmentRange> {
    const range = await super.takeRange(tag, step);
    this.timeline.ranges.push({ range, at: this.timeline.seq++ });
    return range;
  }
}

const generators: SegmentIdGenerator[] = [];
afterEach(async () => {
  for (const g of generators.splice(0)) await g.close();
});

function node(
  data: MemorySegmentData,
  timeline: Timeline,
  options: Partial<SegmentGeneratorOptions> = {},
) {
  const generator = new SegmentIdGenerator({
    store: new TimelineStore(data, timeline),
    ...options,
  });
  generators.push(generator);
  return generator;
}

/** Draws `count` ids by every path (sync, async, batches), logging each on the timeline. */
async function draw(g: SegmentIdGenerator, name: string, timeline: Timeline, count: number) {
  const log = (id: bigint) => timeline.ids.push({ id, at: timeline.seq++, node: name });
  let n = 0;
  while (n < count) {
    const path = n % 3;
    if (path === 0) {
      try {
        log(g.nextIdSync("t"));
      } catch {
        log(await g.nextId("t"));
      }
      n++;
    } else if (path === 1) {
      log(await g.nextId("t"));
      n++;
    } else {
      const batch = Math.min(count - n, 1 + (n % 97));
      for (const id of await g.nextIds("t", batch)) log(id);
      n += batch;
    }
    if (n % 50 === 0) await new Promise((resolve) => setImmediate(resolve));
  }
}

function expectIncreasing(ids: bigint[]): void {
  for (let i = 1; i < ids.length; i++) {
    if (ids[i]! <= ids[i - 1]!) throw new Error(`id ${ids[i]} at ${i} is not above ${ids[i - 1]}`);
  }
}

async function table(step: number): Promise<MemorySegmentData> {
  const data = new MemorySegmentData();
  await new MemorySegmentStore({ data }).createTag({ tag: "t", step, startId: 1n });
  return data;
}

describe("order guarantees", () => {
  it("per node: ids only increase, across switches, a deeper prefetch and every way of asking", async () => {
    const timeline = new Timeline();
    const g = node(await table(37), timeline, { dynamicStep: true, prefetch: { maxDepth: 6 } });
    await g.start();
    await draw(g, "a", timeline, 20_000);
    expectIncreasing(timeline.ids.map((e) => e.id));
    // The burst did deepen the prefetch: the guarantee held with several ranges ahead.
    expect(timeline.ranges.some((r) => r.range.step > 37 * 2)).toBe(true);
  });

  it("per node across restarts: after a graceful close (given back or not) and after a crash, ids continue above every earlier one", async () => {
    const timeline = new Timeline();
    const data = await table(100);
    const ids: bigint[] = [];
    for (const ending of ["give-back", "no give-back", "crash", "give-back"] as const) {
      const g = node(data, timeline, { giveBackOnClose: ending === "give-back" });
      await g.start();
      const from = timeline.ids.length;
      await draw(g, "a", timeline, 250);
      ids.push(...timeline.ids.slice(from).map((e) => e.id));
      // A crash: the node stops handing out ids and never closes (its ranges are lost, a gap).
      if (ending !== "crash") await g.close();
      else generators.splice(generators.indexOf(g), 1);
    }
    expectIncreasing(ids);
  });

  it("across nodes: ids trend upwards: every id of a range is above every id handed out before it was taken", async () => {
    const timeline = new Timeline();
    const data = await table(50);
    const a = node(data, timeline);
    const b = node(data, timeline, { prefetch: false });
    await Promise.all([a.start(), b.start()]);
    for (let round = 0; round < 20; round++) {
      await draw(a, "a", timeline, 30 + ((round * 37) % 90));
      await draw(b, "b", timeline, 20 + ((round * 53) % 70));
    }
    // Per node, increasing; across nodes, not in order (a holds lower ranges while b serves).
    for (const name of ["a", "b"]) {
      expectIncreasing(timeline.ids.filter((e) => e.node === name).map((e) => e.id));
    }
    const all = timeline.ids.map((e) => e.id);
    expect(all.some((id, i) => i > 0 && id < all[i - 1]!)).toBe(true);
    // The trend: before each range was taken, every id handed out was below its start.
    for (const { range, at } of timeline.ranges) {
      let highest = 0n;
      for (const e of timeline.ids) if (e.at < at && e.id > highest) highest = e.id;
      expect(range.start).toBeGreaterThan(highest);
    }
    expect(new Set(all).size).toBe(all.length);
  });
});
