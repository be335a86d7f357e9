// The embedded store with worker processes: a worker's RemoteSegmentStore sends each call to the
// primary's StoreHost, which runs it on the one store. Here the two are joined by a plain call
// (node:cluster's IPC carries the same arguments, bigints included).
import { ErrorCodes, isLeafError } from "@leaf/core";
import { MemorySegmentData, MemorySegmentStore } from "@leaf/segment";
import { describe, expect, it } from "vitest";
import { RemoteSegmentStore, StoreHost } from "../src/ipc-store";

async function pair() {
  const store = new MemorySegmentStore({ data: new MemorySegmentData() });
  await store.createTag({ tag: "orders", step: 100, startId: 0n });
  const host = new StoreHost(store);
  const worker = new RemoteSegmentStore("memory", (op, args) => host.run(1, op, args));
  return { store, worker };
}

describe("a worker's store over IPC", () => {
  it("sends the floor of a range (the worker's high-water mark): below it, refused and nothing moved", async () => {
    const { store, worker } = await pair();
    const refused = await worker.takeRange("orders", undefined, 500n).catch((e: unknown) => e);
    expect(isLeafError(refused, ErrorCodes.CORRUPT_DATA)).toBe(true);
    expect((refused as Error).message).toMatch(
      /below 500, the end of the highest range this node took/,
    );
    expect((await store.describeTags())[0]!.maxId).toBe(0n);
    const range = await worker.takeRange("orders", 50);
    expect([range.start, range.end]).toEqual([0n, 50n]);
    const at = await worker.takeRange("orders", undefined, 50n);
    expect([at.start, at.end]).toEqual([50n, 150n]);
  });
});
