// Counting repeated ids, the two ways fault tests do it: a Set for a few thousand, sorted typed
// arrays for millions.
import { describe, expect, it } from "vitest";
import { countDuplicates, countRepeatedIds, IdLog } from "../src/index";

describe("countDuplicates", () => {
  it("counts every repeat after the first time, across lists", () => {
    expect(countDuplicates([[1n, 2n, 3n], [3n, 4n, 3n], []])).toEqual({
      total: 6,
      duplicates: 2,
      examples: [3n, 3n],
    });
    expect(countDuplicates([["10", "11"], ["12"]])).toEqual({
      total: 3,
      duplicates: 0,
      examples: [],
    });
  });
});

describe("IdLog and countRepeatedIds", () => {
  it("keep ids past one chunk exactly, in order, and find the same repeats as countDuplicates", () => {
    const log = new IdLog();
    const big = 2n ** 62n + 12_345n;
    const pushed: bigint[] = [];
    // Past two chunks of 65,536, with ids above 2^53 (exact only as 64-bit integers).
    for (let i = 0; i < 150_000; i++) {
      const id = big + BigInt(i * 7);
      log.push(id);
      pushed.push(id);
    }
    expect(log.count).toBe(150_000);
    expect(log.parts().map((p) => p.length)).toEqual([65_536, 65_536, 18_928]);
    expect(Array.from(log.values())).toEqual(pushed);

    const other = new BigUint64Array([big + 7n, big + 14n, 5n, 5n, big + 7n]);
    const found = countRepeatedIds([log, other]);
    const reference = countDuplicates([pushed, Array.from(other)]);
    expect(found.total).toBe(reference.total);
    expect(found.duplicates).toBe(reference.duplicates);
    expect(found.duplicates).toBe(4);
    expect(found.examples).toEqual([5n, big + 7n, big + 14n]);
    expect(found.sorted[0]).toBe(5n);
    expect(found.sorted.at(-1)).toBe(big + 149_999n * 7n);
  });

  it("count nothing in empty lists", () => {
    expect(countRepeatedIds([new IdLog(), new BigInt64Array(0)])).toMatchObject({
      total: 0,
      duplicates: 0,
      examples: [],
    });
  });
});
