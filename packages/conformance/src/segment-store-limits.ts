// The limits of the segment-store contract, a group of the conformance suite: what a store refuses
// (a tag that exists, an unknown or malformed tag, a bad step, a range past 2^63 - 1, a damaged
// row, a max id moved back) without moving anything, and the edges it must take exactly (a
// 128-character tag, ids above 2^53). Apart from segment-store-suite.ts, which holds the ranges
// handed out.
import assert from "node:assert/strict";
import { ErrorCodes, isLeafError, LeafCodes } from "@leaf/core";
import type { SegmentStore } from "@leaf/segment";
import { assertContiguous, type Scenario } from "./segment-store-scenario";
import type { ConformanceContext } from "./shared";

/** The contract's largest id: `max_id` is a signed BIGINT (2^63 - 1). */
const MAX_ID = (1n << 63n) - 1n;
/** The contract's largest step: `step` is a signed INT (2^31 - 1). */
const MAX_STEP = 2_147_483_647;

/**
 * Changes a tag's stored max id and/or step behind the open store's back (the suite's `editRow`).
 */
export type EditRow = (
  context: ConformanceContext,
  tag: string,
  row: { maxId?: bigint; step?: number },
) => Promise<void>;

/** Registers the scenarios of bad input and of the edges of the id and step ranges. */
export function limitScenarios(scenario: Scenario): void {
  scenario("refuses to create a tag that exists and leaves it as it was", async (open) => {
    const store = await open();
    await store.createTag({ tag: "orders", step: 10, startId: 100n });
    await store.takeRange("orders");
    await assert.rejects(
      store.createTag({ tag: "orders", step: 99, startId: 1n }),
      (error: unknown) => {
        assert.ok(isLeafError(error, ErrorCodes.ALREADY_EXISTS), String(error));
        assert.equal(error.details.reason, "exists");
        return true;
      },
    );
    const range = await store.takeRange("orders");
    assert.deepEqual([range.start, range.step], [110n, 10]);
  });

  scenario(
    "answers UNKNOWN_TAG (-2) for a tag it does not hold, also one that reads like SQL",
    async (open) => {
      const store = await open();
      await store.createTag({ tag: "orders", step: 10 });
      for (const tag of [
        "missing",
        "orders' OR '1'='1",
        "x'; DROP TABLE leaf_alloc; --",
        'orders" --',
      ]) {
        await assert.rejects(store.takeRange(tag), (error: unknown) => {
          assert.ok(isLeafError(error, ErrorCodes.UNKNOWN_TAG), `${tag}: ${String(error)}`);
          assert.equal(error.leafCode, LeafCodes.SEGMENT_UNKNOWN_TAG);
          return true;
        });
        await assert.rejects(store.updateStep(tag, 5), (e: unknown) =>
          isLeafError(e, ErrorCodes.UNKNOWN_TAG),
        );
      }
      assert.deepEqual(await store.listTags(), ["orders"]);
      assert.equal((await store.takeRange("orders")).start, 1n);
    },
  );

  scenario(
    "rejects malformed tags, steps, start ids and descriptions with INVALID_ARGUMENT",
    async (open) => {
      const store = await open();
      await store.createTag({ tag: "orders", step: 10 });
      const invalid = (e: unknown) => isLeafError(e, ErrorCodes.INVALID_ARGUMENT);
      const badTags: unknown[] = ["", "x".repeat(129), "a\nb", "tab\there", "nul\u0000", 42, null];
      for (const tag of badTags) {
        await assert.rejects(store.takeRange(tag as string), invalid, `takeRange(${String(tag)})`);
        await assert.rejects(store.createTag({ tag: tag as string, step: 1 }), invalid);
      }
      // Valid names for a row, but no URL path can ask for them: not created.
      for (const tag of [".", ".."]) {
        await assert.rejects(
          store.createTag({ tag, step: 1 }),
          (e: unknown) => invalid(e) && (e as Error).message.includes('other than "." and ".."'),
          `createTag(${tag})`,
        );
      }
      for (const step of [0, -1, 1.5, 2 ** 31, Number.NaN, "10"]) {
        await assert.rejects(
          store.takeRange("orders", step as number),
          invalid,
          `step ${String(step)}`,
        );
        await assert.rejects(store.updateStep("orders", step as number), invalid);
        await assert.rejects(store.createTag({ tag: "other", step: step as number }), invalid);
      }
      for (const startId of [-1n, MAX_ID + 1n, 5 as unknown as bigint]) {
        await assert.rejects(store.createTag({ tag: "other", step: 1, startId }), invalid);
      }
      await assert.rejects(
        store.createTag({ tag: "other", step: 1, description: "d".repeat(257) }),
        invalid,
      );
      assert.deepEqual(await store.listTags(), ["orders"]);
      const range = await store.takeRange("orders");
      assert.deepEqual([range.start, range.end], [1n, 11n]);
    },
  );

  scenario("accepts a tag of exactly 128 characters, non-ASCII included", async (open) => {
    const store = await open();
    const tag = `${"é".repeat(100)}${"t".repeat(28)}`;
    await store.createTag({ tag, step: 2 });
    assert.deepEqual(await store.listTags(), [tag]);
    assert.equal((await store.takeRange(tag)).end, 3n);
  });

  scenario("keeps values above 2^53 exact", async (open) => {
    const store = await open();
    const start = 2n ** 53n - 3n;
    await store.createTag({ tag: "big", step: 5, startId: start });
    const a = await store.takeRange("big");
    const b = await store.takeRange("big", 7);
    assert.deepEqual(
      [a.start, a.end, b.start, b.end],
      [start, start + 5n, start + 5n, start + 12n],
    );
    const [record] = await store.describeTags();
    assert.equal(record?.maxId, start + 12n);
  });

  scenario(
    "refuses a range past 2^63 - 1 with TAG_EXHAUSTED (-3) and leaves the tag as it was",
    async (open) => {
      const store = await open();
      await store.createTag({ tag: "edge", step: 10, startId: MAX_ID - 15n });
      const last = await store.takeRange("edge");
      assert.deepEqual([last.start, last.end], [MAX_ID - 15n, MAX_ID - 5n]);
      await assert.rejects(
        store.takeRange("edge"),
        (e: unknown) => isLeafError(e, ErrorCodes.TAG_EXHAUSTED) && e.leafCode === -3,
      );
      await assert.rejects(store.takeRange("edge", 6), (e: unknown) =>
        isLeafError(e, ErrorCodes.TAG_EXHAUSTED),
      );
      const fits = await store.takeRange("edge", 5);
      assert.deepEqual([fits.start, fits.end], [MAX_ID - 5n, MAX_ID]);
    },
  );

  scenario(
    "refuses bad ranges/steps: a step that is not 1 .. 2,147,483,647 moves nothing, and every range ends above its start",
    async (open) => {
      const store = await open();
      await store.createTag({ tag: "orders", step: 10, startId: 0n });
      for (const step of [0, -1, -1000, 2 ** 31, 1.5, Number.NaN, Number.POSITIVE_INFINITY]) {
        const named = (e: unknown) =>
          isLeafError(e, ErrorCodes.INVALID_ARGUMENT) && e.message.includes(String(step));
        await assert.rejects(store.takeRange("orders", step), named, `takeRange step ${step}`);
        await assert.rejects(store.updateStep("orders", step), named, `updateStep ${step}`);
        await assert.rejects(
          store.createTag({ tag: "neg", step }),
          named,
          `createTag step ${step}`,
        );
      }
      assert.deepEqual(await store.listTags(), ["orders"]);
      assert.equal(await maxIdOf(store, "orders"), 0n);
      const ranges = [
        await store.takeRange("orders"),
        await store.takeRange("orders", 1),
        await store.takeRange("orders", MAX_STEP),
        await store.takeRange("orders"),
      ];
      for (const r of ranges) {
        assert.ok(r.end > r.start, `range [${r.start}, ${r.end}) ends above its start`);
        assert.equal(r.end - r.start, BigInt(r.step));
        assert.ok(r.tableStep >= 1 && r.tableStep <= MAX_STEP, `tableStep ${r.tableStep}`);
      }
      assertContiguous(ranges, 0n);
    },
  );
}

/**
 * Registers the scenarios of a row changed behind the store's back (needs the adapter's `editRow`).
 */
/**
 * Registers the scenario of takeRange's `floor` (a restarted node's high-water mark): a max id below
 * it is refused and not moved, one at it is taken, and a floor that is no id is INVALID_ARGUMENT.
 */
export function floorScenarios(scenario: Scenario): void {
  scenario(
    "refuses a range below the caller's floor (a restarted node's mark) without moving the max id",
    async (open) => {
      const store = await open();
      await store.createTag({ tag: "orders", step: 100, startId: 0n });
      await store.createTag({ tag: "users", step: 100, startId: 500n });
      const below = corrupt(/below 500\b/, "max-id-moved-back");
      await assert.rejects(store.takeRange("orders", undefined, 500n), below, "the stored step");
      await assert.rejects(store.takeRange("orders", 600, 500n), below, "a step past the floor");
      assert.equal(await maxIdOf(store, "orders"), 0n, "a refused range moves nothing");
      const taken = await store.takeRange("users", undefined, 500n);
      assert.deepEqual([taken.start, taken.end], [500n, 600n]);
      for (const floor of [-1n, 1n << 63n, 5, "500"]) {
        await assert.rejects(
          store.takeRange("orders", undefined, floor as bigint),
          (e: unknown) => isLeafError(e, ErrorCodes.INVALID_ARGUMENT) && /floor/.test(e.message),
          `floor ${String(floor)}`,
        );
      }
      assert.equal(await maxIdOf(store, "orders"), 0n, "a rejected call moves nothing");
    },
  );
}

export function damagedRowScenarios(scenario: Scenario, editRow: EditRow): void {
  scenario(
    "refuses bad ranges/steps: a stored step of -1000 or 0, or a negative max id, gives no range and moves nothing",
    async (open, namespace) => {
      const store = await open();
      await store.createTag({ tag: "orders", step: 10, startId: 1n });
      await store.takeRange("orders");
      for (const step of [-1000, 0]) {
        await editRow({ namespace }, "orders", { step });
        const bad = corrupt(new RegExp(`step is ${step}\\b`), "bad-step");
        await assert.rejects(store.takeRange("orders"), bad, `stored step ${step}`);
        await assert.rejects(store.takeRange("orders", 5), bad, `stored step ${step}, step 5`);
        assert.equal(await maxIdOf(store, "orders"), 11n, "the max id did not move");
      }
      await editRow({ namespace }, "orders", { step: 10 });
      const fixed = await store.takeRange("orders");
      assert.deepEqual([fixed.start, fixed.end], [11n, 21n]);

      await store.createTag({ tag: "negative", step: 10, startId: 0n });
      await editRow({ namespace }, "negative", { maxId: -5n });
      await assert.rejects(store.takeRange("negative"), corrupt(/max id is -5\b/, "bad-max-id"));
      assert.equal(await maxIdOf(store, "negative"), -5n, "the max id did not move");
    },
  );

  scenario(
    "refuses a range not above the last one: a max id moved back by three ranges, into a range, or reset to 1 is refused and not advanced",
    async (open, namespace) => {
      const store = await open();
      await store.createTag({ tag: "orders", step: 100, startId: 0n });
      for (let i = 0; i < 3; i++) await store.takeRange("orders");
      const behind = (e: unknown) => {
        corrupt(/below 300\b/)(e);
        assert.ok(
          ["max-id-moved-back", "stale-primary"].includes(
            String((e as { details: { reason: unknown } }).details.reason),
          ),
        );
        return true;
      };
      for (const maxId of [0n, 250n, 1n, 299n]) {
        await editRow({ namespace }, "orders", { maxId });
        await assert.rejects(store.takeRange("orders"), behind, `max id moved back to ${maxId}`);
        await assert.rejects(store.takeRange("orders", 500), behind, `step 500 from ${maxId}`);
        assert.equal(await maxIdOf(store, "orders"), maxId, "a refused range moves nothing");
      }
      await editRow({ namespace }, "orders", { maxId: 300n });
      const resumed = await store.takeRange("orders");
      assert.deepEqual([resumed.start, resumed.end], [300n, 400n]);
    },
  );
}

const corrupt = (pattern: RegExp, reason?: string) => (error: unknown) => {
  assert.ok(
    isLeafError(error, ErrorCodes.CORRUPT_DATA),
    `expected CORRUPT_DATA, got ${String(error)}`,
  );
  assert.match(error.message, pattern);
  if (reason !== undefined) assert.equal(error.details.reason, reason);
  return true;
};

const maxIdOf = async (store: SegmentStore, tag: string) =>
  (await store.describeTags()).find((r) => r.tag === tag)?.maxId;
