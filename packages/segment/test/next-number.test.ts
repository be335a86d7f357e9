// Segment ids as JS numbers: `nextNumberSync` / `nextNumber` return exactly the ids (property test
// over random starts and steps), and past 2^53 - 1 they fail with UNSAFE_INTEGER instead of a
// rounded id. Crossing 2^53 on a real MariaDB: @leaf/segment-mysql's next-number-mysql.test.ts.
import { ErrorCodes, isLeafError, MAX_SAFE_ID } from "@leaf/core";
import fc from "fast-check";
import { afterEach, describe, expect, it } from "vitest";
import { MemorySegmentStore, SegmentIdGenerator } from "../src/index";

const SAFE = Number.MAX_SAFE_INTEGER;

const generators: SegmentIdGenerator[] = [];
afterEach(async () => {
  for (const g of generators.splice(0)) await g.close();
});

async function memoryGenerator(startId: bigint, step: number) {
  const store = new MemorySegmentStore();
  await store.createTag({ tag: "t", step, startId });
  const generator = new SegmentIdGenerator({ store, dynamicStep: false });
  generators.push(generator);
  await generator.start();
  return generator;
}

const isUnsafe = (error: unknown) => isLeafError(error, ErrorCodes.UNSAFE_INTEGER);

describe("nextNumberSync / nextNumber", () => {
  it("return exactly the ids, consecutive from the start, across range switches", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.bigInt({ min: 0n, max: MAX_SAFE_ID - 5_000n }),
        fc.integer({ min: 1, max: 300 }),
        fc.array(fc.boolean(), { minLength: 1, maxLength: 1_500 }),
        async (startId, step, useAsync) => {
          const generator = await memoryGenerator(startId, step);
          let expected = startId;
          for (const asynchronous of useAsync) {
            let n: number;
            try {
              n = asynchronous ? await generator.nextNumber("t") : generator.nextNumberSync("t");
            } catch (error) {
              // The sync path cannot wait for a range: the async one does.
              if (!isLeafError(error, ErrorCodes.SEGMENTS_EXHAUSTED)) throw error;
              n = await generator.nextNumber("t");
            }
            expect(Number.isSafeInteger(n)).toBe(true);
            expect(BigInt(n)).toBe(expected);
            expected++;
          }
          await generator.close();
        },
      ),
      { numRuns: 60 },
    );
  });

  it("serve each tag its own ids when calls alternate, and never from a deleted tag", async () => {
    const store = new MemorySegmentStore();
    await store.createTag({ tag: "a", step: 50, startId: 1n });
    await store.createTag({ tag: "b", step: 50, startId: 1_000_000n });
    const generator = new SegmentIdGenerator({ store, dynamicStep: false });
    generators.push(generator);
    await generator.start();
    const a: number[] = [];
    const b: number[] = [];
    for (let i = 0; i < 40; i++) {
      a.push(generator.nextNumberSync("a"));
      if (i % 3 === 0) b.push(generator.nextNumberSync("b"));
    }
    // The last call before the delete is for "a": its buffer is the one the generator served last.
    a.push(generator.nextNumberSync("a"));
    expect(a).toEqual(Array.from({ length: 41 }, (_, i) => 1 + i));
    expect(b).toEqual(Array.from({ length: 14 }, (_, i) => 1_000_000 + i));
    await generator.deleteTag("a");
    expect(() => generator.nextNumberSync("a")).toThrow(
      expect.objectContaining({ code: ErrorCodes.UNKNOWN_TAG }),
    );
    // Created again (above the old ids): served from its new row, not the deleted buffer.
    await generator.createTag({ tag: "a", step: 50, startId: 5_000n });
    await expect(generator.nextNumber("a")).resolves.toBe(5_000);
    expect(generator.nextNumberSync("a")).toBe(5_001);
  });

  it("hand out 2^53 - 1 and then refuse with UNSAFE_INTEGER, never a rounded id", async () => {
    for (const step of [1, 7, 1000]) {
      const generator = await memoryGenerator(MAX_SAFE_ID - 2_000n, step);
      const numbers: number[] = [];
      for (let i = 0; i < 2_001; i++) numbers.push(await generator.nextNumber("t"));
      expect(numbers.at(-1)).toBe(SAFE);
      expect(new Set(numbers).size).toBe(2_001);
      let error: unknown;
      try {
        generator.nextNumberSync("t");
      } catch (caught) {
        error = caught;
      }
      if (isLeafError(error, ErrorCodes.SEGMENTS_EXHAUSTED)) {
        error = await generator.nextNumber("t").catch((caught: unknown) => caught);
      }
      expect(isUnsafe(error)).toBe(true);
      expect(String((error as Error).message)).toContain(
        '[leaf] [segment] id 9007199254740992 of tag "t" is above Number.MAX_SAFE_INTEGER',
      );
      await expect(generator.nextNumber("t")).rejects.toSatisfy(isUnsafe);
      // The bigint path goes on after the ids refused as numbers (skipped, never handed out twice).
      expect(await generator.nextId("t")).toBe(MAX_SAFE_ID + 3n);
      await generator.close();
    }
  });
});
