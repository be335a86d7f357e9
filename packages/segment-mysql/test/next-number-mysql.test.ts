// Segment ids as JS numbers on a real MariaDB: two generators cross 2^53 - 1; numbers up to it,
// UNSAFE_INTEGER above, every id counted, none repeated. (The property test over the memory store
// is @leaf/segment's next-number.test.ts.)
import { ErrorCodes, isLeafError, MAX_SAFE_ID } from "@leaf/core";
import { SegmentIdGenerator } from "@leaf/segment";
import { type MysqlHandle, startMysql } from "@leaf/testkit";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { MysqlSegmentStore } from "../src/index";

const SAFE = Number.MAX_SAFE_INTEGER;

const generators: SegmentIdGenerator[] = [];
afterEach(async () => {
  for (const g of generators.splice(0)) await g.close();
});

const isUnsafe = (error: unknown) => isLeafError(error, ErrorCodes.UNSAFE_INTEGER);

describe("crossing 2^53 on MariaDB", () => {
  let db: MysqlHandle;
  let url: string;

  beforeAll(async () => {
    db = await startMysql({ useEnv: false });
    url = db.urlFor(await db.createDatabase("segment_numbers"));
  });

  afterAll(async () => {
    await db?.dispose();
  });

  it("two generators: numbers up to 2^53 - 1, UNSAFE_INTEGER above, and no id seen twice", async () => {
    const setup = new MysqlSegmentStore({ url, table: "leaf_alloc_numbers" });
    await setup.createSchema();
    // 20 ranges of 500 below 2^53, the rest above.
    await setup.createTag({ tag: "n", step: 500, startId: MAX_SAFE_ID + 1n - 10_000n });
    await setup.close();
    const servers = [0, 1].map(() => {
      const generator = new SegmentIdGenerator({
        store: new MysqlSegmentStore({ url, table: "leaf_alloc_numbers" }),
        dynamicStep: false,
      });
      generators.push(generator);
      return generator;
    });
    await Promise.all(servers.map((g) => g.start()));
    const seen = new Map<bigint, number>();
    const count = (id: bigint) => seen.set(id, (seen.get(id) ?? 0) + 1);
    let refused = 0;
    let bigints = 0;
    // Each server asks for numbers until refused, then goes on with bigints for a while.
    await Promise.all(
      servers.map(async (generator, s) => {
        let numbersDone = false;
        for (let i = 0; i < 12_000; i++) {
          if (!numbersDone) {
            try {
              const n = await generator.nextNumber("n");
              expect(n).toBeLessThanOrEqual(SAFE);
              count(BigInt(n));
            } catch (error) {
              expect(isUnsafe(error)).toBe(true);
              const id = BigInt((error as { details: { id: string } }).details.id);
              expect(id).toBeGreaterThan(MAX_SAFE_ID);
              refused++;
              numbersDone = true;
            }
          } else {
            const id = await generator.nextId("n");
            expect(id).toBeGreaterThan(MAX_SAFE_ID);
            count(id);
            bigints++;
          }
          if (i % 97 === s) await new Promise((resolve) => setImmediate(resolve));
        }
      }),
    );
    expect(refused).toBe(2);
    expect(bigints).toBeGreaterThan(0);
    const repeated = [...seen].filter(([, times]) => times > 1);
    expect(repeated).toEqual([]);
    // Every id below 2^53 was handed out as a number by one server or the other: 10,000 of them.
    const below = [...seen.keys()].filter((id) => id <= MAX_SAFE_ID);
    expect(below.length).toBe(10_000);
  });
});
