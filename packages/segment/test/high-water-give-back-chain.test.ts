// Two nodes stopped together can chain their give-backs: the node holding the later range gives it
// back first (the max id comes down to where that range began), then the node whose range ends just
// there gives back its rest. Each node's high-water mark must then still be at or below the max id,
// or the first node refuses the tag at its next start (CORRUPT_DATA) for ids nobody handed out.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { countDuplicates } from "@leaf/testkit";
import { afterAll, describe, expect, it } from "vitest";
import { MemorySegmentData, MemorySegmentStore, SegmentIdGenerator } from "../src/index";

const dirs: string[] = [];
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

function node(data: MemorySegmentData, dir: string) {
  return new SegmentIdGenerator({
    store: new MemorySegmentStore({ data }),
    highWater: { dir, storeId: "memory" },
    dynamicStep: false,
    loadOnStart: false,
    giveBackOnClose: true,
    prefetch: { maxDepth: 1 },
  });
}

describe("give-backs of two nodes stopped together", () => {
  it("leave both nodes serving the tag after a restart, no id twice", async () => {
    const data = new MemorySegmentData();
    await new MemorySegmentStore({ data }).createTag({ tag: "t", step: 500, startId: 1n });
    const [dirX, dirY] = [0, 1].map(() => mkdtempSync(join(tmpdir(), "leaf-hw-chain-")));
    dirs.push(dirX!, dirY!);
    const x = node(data, dirX!);
    const y = node(data, dirY!);
    await x.start();
    await y.start();
    const before: bigint[] = [];
    // Y takes [1, 501), X takes [501, 1001); Y uses 100 of its range, which loads [1001, 1501)
    // ahead of it: Y's ranges are not contiguous, X's range lies between them.
    before.push(await y.nextId("t"), await x.nextId("t"));
    for (let i = 0; i < 100; i++) before.push(await y.nextId("t"));
    for (let i = 0; i < 100 && !y.snapshot("t")!.nextReady; i++) {
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    expect(y.snapshot("t")!.nextReady).toBe(true);
    // Y first: [1001, 1501) back, the max id 1001; then X: [502, 1001) back, the max id 502.
    await y.close();
    await x.close();
    expect(y.giveBackReport().map((g) => [g.from, g.end, g.outcome])).toEqual([
      [1001n, 1501n, "given-back"],
    ]);
    expect(x.giveBackReport().map((g) => [g.from, g.end, g.outcome])).toEqual([
      [502n, 1001n, "given-back"],
    ]);
    const x2 = node(data, dirX!);
    const y2 = node(data, dirY!);
    await x2.start();
    await y2.start();
    const after = [await x2.nextId("t"), await y2.nextId("t")];
    for (let i = 0; i < 1000; i++) after.push(await (i % 2 ? x2 : y2).nextId("t"));
    await x2.close();
    await y2.close();
    expect(countDuplicates([before, after]).duplicates).toBe(0);
  });
});
