// Ids that fit JavaScript: the 53-bit layouts, `nextNumber()` of the generator and the worker
// (every number equals its bigint, none repeats, none is past 2^53 - 1), the refusal for wider
// layouts, and the README's layout table, which must be what the code computes.
import { readFileSync } from "node:fs";
import { started } from "@leaf/testkit";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  ErrorCodes,
  isLeafError,
  type LeafError,
  layouts,
  layoutTable,
  MAX_SAFE_ID,
  ManualClock,
  MemoryRegistry,
  SnowflakeGenerator,
  SnowflakeWorker,
  toSafeNumber,
} from "../src/index";

const SAFE_LAYOUTS = [layouts.safe53ms, layouts.safe53s];

function errorOf(fn: () => unknown): LeafError {
  try {
    fn();
  } catch (error) {
    if (isLeafError(error)) return error;
    throw error;
  }
  throw new Error("expected an error");
}

describe("53-bit layouts", () => {
  it("never make an id above Number.MAX_SAFE_INTEGER, and the others can", () => {
    for (const layout of SAFE_LAYOUTS) {
      expect(layout.fitsNumber).toBe(true);
      expect(layout.totalBits).toBe(53);
      const largest = layout.compose({
        ticks: layout.maxTicks,
        workerId: layout.maxWorkerId,
        sequence: layout.maxSequence,
      });
      expect(largest).toBe(MAX_SAFE_ID);
    }
    for (const layout of [layouts.leaf, layouts.sonyflake, layouts.baidu, layouts.redisSequence]) {
      expect(layout.fitsNumber).toBe(false);
      expect(layout.totalBits).toBeGreaterThan(53);
    }
  });

  it("are the table in the README, as computed (run-out dates included)", () => {
    const readme = readFileSync(new URL("../README.md", import.meta.url), "utf8");
    const table = layoutTable(layouts);
    expect(table).toContain("| `layouts.safe53ms`      | 41 / 4 / 8");
    expect(table).toContain("2089-09-06");
    expect(
      readme.includes(table),
      `packages/core/README.md must hold the output of layoutTable(layouts):\n${table}`,
    ).toBe(true);
  });
});

describe("nextNumber", () => {
  it("returns numbers that are exactly the ids, increasing, none repeated (system clock)", () => {
    for (const layout of SAFE_LAYOUTS) {
      const g = new SnowflakeGenerator({ workerId: layout.maxWorkerId, layout });
      const seen = new Set<bigint>();
      let previous = -1n;
      // About a second's worth of ids of the layout (safe53s: 4,096 a second).
      const count = Math.min(20_000, layout.idsPerSecondPerWorker);
      // Mixed with the bigint path: both take from the same sequence.
      for (let i = 0; i < count; i++) {
        let id: bigint;
        if (i % 3 === 0) {
          id = g.nextId();
        } else {
          const n = g.nextNumber();
          expect(Number.isSafeInteger(n)).toBe(true);
          id = BigInt(n);
          expect(Number(id)).toBe(n);
        }
        expect(id).toBeGreaterThan(previous);
        expect(layout.decompose(id).workerId).toBe(layout.maxWorkerId);
        previous = id;
        seen.add(id);
      }
      expect(seen.size).toBe(count);
    }
  });

  it("equals the bigint id at any chosen instant, up to the layout's last tick", () => {
    for (const layout of SAFE_LAYOUTS) {
      fc.assert(
        fc.property(
          fc.oneof(fc.integer({ min: 0, max: layout.maxTicks }), fc.constant(layout.maxTicks)),
          fc.integer({ min: 0, max: layout.maxWorkerId }),
          (ticks, workerId) => {
            const at = layout.msAt(ticks);
            const numbers = new SnowflakeGenerator({
              workerId,
              layout,
              clock: new ManualClock(at),
              randomSequenceStart: 0,
              expiryWarningMs: 0,
            });
            const bigints = new SnowflakeGenerator({
              workerId,
              layout,
              clock: new ManualClock(at),
              randomSequenceStart: 0,
              expiryWarningMs: 0,
            });
            for (let i = 0; i < 3; i++) {
              const n = numbers.nextNumber();
              const id = bigints.nextId();
              expect(BigInt(n)).toBe(id);
              expect(n).toBeLessThanOrEqual(Number.MAX_SAFE_INTEGER);
            }
          },
        ),
        { numRuns: 300 },
      );
    }
  });

  it("gives the very largest id, 2^53 - 1, exactly, then refuses the next tick", () => {
    const layout = layouts.safe53ms;
    const clock = new ManualClock(layout.lastInstantMs);
    const g = new SnowflakeGenerator({
      workerId: layout.maxWorkerId,
      layout,
      clock,
      randomSequenceStart: 0,
      expiryWarningMs: 0,
    });
    let last = 0;
    for (let i = 0; i <= layout.maxSequence; i++) last = g.nextNumber();
    expect(last).toBe(Number.MAX_SAFE_INTEGER);
    expect(BigInt(last)).toBe(MAX_SAFE_ID);
    expect(errorOf(() => g.nextNumber()).code).toBe(ErrorCodes.LAYOUT_EXHAUSTED);
  });

  it("is refused with the reason for a layout wider than 53 bits, and takes no id", () => {
    const clock = new ManualClock(Date.UTC(2026, 0, 1));
    const g = new SnowflakeGenerator({ workerId: 1, clock, randomSequenceStart: 0 });
    const first = g.nextId();
    const error = errorOf(() => g.nextNumber());
    expect(error.code).toBe(ErrorCodes.INVALID_LAYOUT);
    expect(error.message).toBe(
      "[leaf] [core] layout leaf does not fit a JS number: it has 63 bits (41/10/12), so its ids " +
        "reach 9223372036854775807, above Number.MAX_SAFE_INTEGER (9007199254740991). Use nextId() " +
        "(bigint), or a layout of at most 53 bits (layouts.safe53ms, layouts.safe53s)",
    );
    expect(g.nextId()).toBe(first + 1n);
  });

  it("works through a worker holding a registry lease", async () => {
    const worker = await started(
      new SnowflakeWorker({
        registry: new MemoryRegistry(),
        node: { name: "js", ip: "127.0.0.1", port: 1 },
        layout: layouts.safe53s,
      }),
    );
    try {
      const numbers = Array.from({ length: 5000 }, () => worker.nextNumber());
      expect(new Set(numbers).size).toBe(5000);
      for (let i = 1; i < numbers.length; i++) expect(numbers[i]!).toBeGreaterThan(numbers[i - 1]!);
      expect(layouts.safe53s.decompose(BigInt(numbers[0]!)).workerId).toBe(worker.lease!.workerId);
    } finally {
      await worker.close();
    }
    const leaf = await started(
      new SnowflakeWorker({
        registry: new MemoryRegistry(),
        node: { name: "wide", ip: "127.0.0.1", port: 2 },
      }),
    );
    try {
      expect(errorOf(() => leaf.nextNumber()).code).toBe(ErrorCodes.INVALID_LAYOUT);
    } finally {
      await leaf.close();
    }
  });
});

describe("toSafeNumber", () => {
  it("returns the same integer for every id up to 2^53 - 1 and UNSAFE_INTEGER above", () => {
    fc.assert(
      fc.property(
        fc.oneof(
          fc.bigInt({ min: 0n, max: (1n << 63n) - 1n }),
          fc.bigInt({ min: 0n, max: MAX_SAFE_ID }),
          fc.constantFrom(0n, MAX_SAFE_ID, MAX_SAFE_ID + 1n, MAX_SAFE_ID + 2n),
        ),
        (id) => {
          if (id <= MAX_SAFE_ID) {
            const n = toSafeNumber(id);
            expect(BigInt(n)).toBe(id);
            expect(Number.isSafeInteger(n)).toBe(true);
          } else {
            const error = errorOf(() => toSafeNumber(id, "segment", 'tag "t"', "nextIdSync"));
            expect(error.code).toBe(ErrorCodes.UNSAFE_INTEGER);
            expect(error.message).toContain(`id ${id} of tag "t" is above Number.MAX_SAFE_INTEGER`);
          }
        },
      ),
      { numRuns: 5000 },
    );
  });
});
