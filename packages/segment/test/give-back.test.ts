// Give-back on close, the cases where the generator must not try: the store cannot, the node is
// not sure where the max id stands (its last load failed), or it was told not to.
import { ErrorCodes, LeafError } from "@leaf/core";
import { describe, expect, it } from "vitest";
import {
  MemorySegmentData,
  MemorySegmentStore,
  SegmentIdGenerator,
  type SegmentRange,
} from "../src/index";

async function table(): Promise<MemorySegmentData> {
  const data = new MemorySegmentData();
  await new MemorySegmentStore({ data }).createTag({ tag: "t", step: 100, startId: 0n });
  return data;
}

const maxIdOf = (data: MemorySegmentData) => data.rows.get("t")!.maxId;

describe("give-back on close: when it is not tried", () => {
  it("gives nothing back with giveBackOnClose: false (Java Leaf's behaviour: the rest is a gap)", async () => {
    const data = await table();
    const g = new SegmentIdGenerator({
      store: new MemorySegmentStore({ data }),
      giveBackOnClose: false,
    });
    await g.start();
    for (let i = 0; i < 10; i++) g.nextIdSync("t");
    await g.close();
    expect(g.giveBackReport()).toEqual([]);
    expect(maxIdOf(data)).toBe(100n);
  });

  it("skips a store without giveBack, saying so", async () => {
    const data = await table();
    const inner = new MemorySegmentStore({ data });
    // A third-party store that implements only the required members.
    const store = {
      kind: "plain",
      listTags: () => inner.listTags(),
      describeTags: () => inner.describeTags(),
      takeRange: (tag: string, step?: number) => inner.takeRange(tag, step),
      createTag: inner.createTag.bind(inner),
      updateStep: inner.updateStep.bind(inner),
      deleteTag: inner.deleteTag.bind(inner),
      close: () => inner.close(),
    };
    const g = new SegmentIdGenerator({ store });
    await g.start();
    g.nextIdSync("t");
    await g.close();
    expect(g.giveBackReport()).toEqual([
      {
        tag: "t",
        from: 1n,
        end: 100n,
        outcome: "skipped",
        reason: "the plain store cannot give back",
      },
    ]);
    expect(maxIdOf(data)).toBe(100n);
  });

  it("skips a tag whose last load failed: the store may have moved its max id for a range the node never saw", async () => {
    const data = await table();
    // The load after the first fails the way a timed-out UPDATE does: the row moved, no answer
    // came.
    class LostAnswer extends MemorySegmentStore {
      calls = 0;
      override async takeRange(tag: string, step?: number): Promise<SegmentRange> {
        const range = await super.takeRange(tag, step);
        if (++this.calls === 2) {
          throw new LeafError({
            component: "test",
            code: ErrorCodes.UNAVAILABLE,
            message: "timeout",
          });
        }
        return range;
      }
    }
    const g = new SegmentIdGenerator({
      store: new LostAnswer({ data }),
      dynamicStep: false,
      prefetch: false,
      retry: { initialMs: 60_000, maxMs: 60_000 },
    });
    await g.start();
    for (let i = 0; i < 20; i++) g.nextIdSync("t"); // past 10%: the preload runs and fails
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(g.snapshot("t")!.consecutiveFailures).toBe(1);
    await g.close();
    expect(g.giveBackReport()).toMatchObject([
      {
        tag: "t",
        from: 20n,
        end: 100n,
        outcome: "skipped",
        reason: expect.stringMatching(/last load failed/),
      },
    ]);
    // Nothing changed: the max id stays past the range whose answer was lost.
    expect(maxIdOf(data)).toBe(200n);
  });
});
