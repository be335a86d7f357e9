// How the segment-store suite registers one scenario: a vitest test on a namespace of its own that
// closes every store it opened, and the check most scenarios end with (ranges that tile without gap
// or overlap). Apart so that each group of scenarios (segment-store-*.ts) can use them.
import assert from "node:assert/strict";
import type { SegmentRange, SegmentStore } from "@leaf/segment";
import { type ConformanceContext, type TestFunction, uniqueNamespace } from "./shared";

/**
 * Registers one test: `body` opens stores on one fresh namespace with `open`; all are closed after.
 */
export type Scenario = (
  title: string,
  body: (open: () => Promise<SegmentStore>, ns: string) => Promise<void>,
) => void;

/** The {@link Scenario} of a suite: tests named `${name}: ${title}`, stores made by `create`. */
export function scenarioOf(
  test: TestFunction,
  name: string,
  create: (context: ConformanceContext) => Promise<SegmentStore>,
  timeout: number,
): Scenario {
  return (title, body) => {
    test(
      `${name}: ${title}`,
      async () => {
        const namespace = uniqueNamespace("seg");
        const opened: SegmentStore[] = [];
        const open = async () => {
          const store = await create({ namespace });
          opened.push(store);
          return store;
        };
        try {
          await body(open, namespace);
        } finally {
          for (const store of opened) await store.close().catch(() => {});
        }
      },
      timeout,
    );
  };
}

/** The ranges, sorted, tile [from, ...) without gap or overlap, each `step` long. */
export function assertContiguous(ranges: SegmentRange[], from: bigint): void {
  const sorted = [...ranges].sort((a, b) => (a.start < b.start ? -1 : a.start > b.start ? 1 : 0));
  let expected = from;
  for (const r of sorted) {
    assert.equal(r.start, expected, `range [${r.start}, ${r.end}) should start at ${expected}`);
    assert.equal(r.end - r.start, BigInt(r.step));
    expected = r.end;
  }
}
