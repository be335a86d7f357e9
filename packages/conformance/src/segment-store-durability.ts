// The durability part of the store conformance suite: a store whose storage stops taking writes
// (a full disk, a file size limit, a read-only database) must refuse ranges, never acknowledge one
// it could not store, and a new instance on the same storage must never hand out an acknowledged id
// again.
import assert from "node:assert/strict";
import { isLeafError } from "@leaf/core";
import type { SegmentRange, SegmentStore } from "@leaf/segment";
import {
  type Capability,
  type ConformanceContext,
  isUnsupported,
  skipUnsupported,
  type TestFunction,
  uniqueNamespace,
} from "./shared";

/** A write fault made real on a store's storage, and how to end it. */
export interface WriteFault {
  /** Makes the storage take writes again (frees the disk, lifts the limit). */
  end(): Promise<void>;
}

/** Options of {@link segmentStoreDurabilityConformance}. */
export interface SegmentStoreDurabilityOptions {
  /** Name shown in front of every test, e.g. "embedded store". */
  name: string;
  /** Returns a NEW store instance on the storage of `namespace` (as in the main suite). */
  create: (context: ConformanceContext) => Promise<SegmentStore>;
  /**
   * Makes the storage of `namespace` refuse further writes for real while `store` is open: fills
   * the disk under it (a small tmpfs), or sets the database read-only. A store whose storage cannot
   * be made to fail on demand says why with `{ unsupported }`.
   */
  induceWriteFault: Capability<
    (context: ConformanceContext, store: SegmentStore) => Promise<WriteFault>
  >;
  /** Per-test time limit in ms (default 60,000). */
  timeoutMs?: number;
}

/**
 * Registers the durability conformance tests with vitest's `test`: under a real write fault the
 * store refuses ranges with a LeafError (none acknowledged without being stored), and after the
 * fault ends a new instance on the same storage hands out ids above every range acknowledged
 * before.
 */
export function segmentStoreDurabilityConformance(
  test: TestFunction,
  options: SegmentStoreDurabilityOptions,
): void {
  const title =
    "never acknowledges a range it could not store (a short or failed write), and never hands it out again";
  const induce = options.induceWriteFault;
  if (isUnsupported(induce)) {
    skipUnsupported(test, options.name, title, induce);
    return;
  }
  test(
    `${options.name}: ${title}`,
    async () => {
      const namespace = uniqueNamespace("segd");
      const context = { namespace };
      const opened: SegmentStore[] = [];
      const open = async () => {
        const store = await options.create(context);
        opened.push(store);
        return store;
      };
      let fault: WriteFault | undefined;
      try {
        const store = await open();
        await store.createTag({ tag: "durable", step: 100, startId: 1n });
        const handedOut: SegmentRange[] = [];
        for (let i = 0; i < 5; i++) handedOut.push(await store.takeRange("durable"));
        fault = await induce(context, store);
        // Takes until the store refuses: a store may still have room for a few writes.
        let refusal: unknown;
        for (let i = 0; i < 100_000 && refusal === undefined; i++) {
          const results = await Promise.allSettled([
            store.takeRange("durable"),
            store.takeRange("durable"),
            store.takeRange("durable", 7),
          ]);
          for (const result of results) {
            if (result.status === "fulfilled") handedOut.push(result.value);
            else refusal ??= result.reason;
          }
        }
        assert.ok(refusal !== undefined, "the store never refused a range under the write fault");
        assert.ok(isLeafError(refusal), `the refusal is not a LeafError: ${String(refusal)}`);
        // Still failing: still refused.
        await assert.rejects(store.takeRange("durable"), (error: unknown) => isLeafError(error));
        await store.close().catch(() => {});
        await fault.end();
        fault = undefined;
        const reopened = await open();
        const after: SegmentRange[] = [];
        for (let i = 0; i < 3; i++) after.push(await reopened.takeRange("durable"));
        let highest = 0n;
        for (const range of handedOut) if (range.end > highest) highest = range.end;
        assert.ok(
          after[0]!.start >= highest,
          `after the fault the store handed out [${after[0]!.start}, ${after[0]!.end}), below ${highest}, the end of a range acknowledged before`,
        );
        assertDisjoint([...handedOut, ...after]);
      } finally {
        await fault?.end().catch(() => {});
        for (const store of opened) await store.close().catch(() => {});
      }
    },
    options.timeoutMs ?? 60_000,
  );
}

function assertDisjoint(ranges: SegmentRange[]): void {
  const sorted = [...ranges].sort((a, b) => (a.start < b.start ? -1 : a.start > b.start ? 1 : 0));
  for (let i = 1; i < sorted.length; i++) {
    const before = sorted[i - 1]!;
    const range = sorted[i]!;
    assert.ok(
      range.start >= before.end,
      `ranges [${before.start}, ${before.end}) and [${range.start}, ${range.end}) overlap: ids handed out twice`,
    );
  }
}
