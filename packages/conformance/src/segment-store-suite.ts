// The conformance suite every segment store runs unchanged: ours (MySQL, embedded, memory) and third
// parties'. It takes vitest's `test` so that it registers real tests in the store's own test file,
// and uses node:assert, so the package needs no test framework at run time. It imports only types
// from @leaf/segment: loading it never loads the segment package. Over 450 lines: one scenario per
// clause of the SegmentStore contract, read top to bottom; splitting them would scatter the contract.
import assert from "node:assert/strict";
import { ErrorCodes, isLeafError, LeafCodes } from "@leaf/core";
import type { SegmentRange, SegmentStore } from "@leaf/segment";
import {
  type Capability,
  type ConformanceContext,
  isUnsupported,
  NOT_DECLARED,
  skipUnsupported,
  type TestFunction,
  uniqueNamespace,
} from "./shared";

/** The contract's largest id: `max_id` is a signed BIGINT (2^63 - 1). */
const MAX_ID = (1n << 63n) - 1n;
/** The contract's largest step: `step` is a signed INT (2^31 - 1). */
const MAX_STEP = 2_147_483_647;

/** Options of {@link segmentStoreConformance}. */
export interface SegmentStoreConformanceOptions {
  /** Name shown in front of every test, e.g. "mysql store". */
  name: string;
  /**
   * Returns a NEW store instance on the storage of `namespace`. The suite closes every store it
   * creates; stores that allow one instance at a time (the embedded store) are created again only
   * after the previous one was closed, unless `concurrentInstances` is on.
   */
  create: (context: ConformanceContext) => Promise<SegmentStore>;
  /** Two open instances on one storage hand out disjoint ranges (stands for two processes). */
  concurrentInstances?: Capability<true>;
  /**
   * Changes a tag's stored max id and/or step behind the open store's back, as an operator's SQL
   * does (`UPDATE leaf_alloc SET max_id = ?, step = ? WHERE biz_tag = ?`), so that the suite can
   * check that the store refuses a damaged row and a max id moved back. A store whose storage
   * cannot be changed from outside while it is open says why with `{ unsupported }`.
   */
  editRow?: Capability<
    (
      context: ConformanceContext,
      tag: string,
      row: { maxId?: bigint; step?: number },
    ) => Promise<void>
  >;
  /** Per-test time limit in ms (default 30,000). */
  timeoutMs?: number;
}

/**
 * Registers the segment-store conformance tests with vitest's `test`:
 *
 * ```ts
 * import { segmentStoreConformance } from "@leaf/conformance/segment-store";
 * import { test } from "vitest";
 * segmentStoreConformance(test, { name: "my store", create: ({ namespace }) => openMyStore(namespace) });
 * ```
 */
export function segmentStoreConformance(
  test: TestFunction,
  options: SegmentStoreConformanceOptions,
): void {
  const timeout = options.timeoutMs ?? 30_000;

  const scenario = (
    title: string,
    body: (open: () => Promise<SegmentStore>, ns: string) => Promise<void>,
  ) => {
    test(
      `${options.name}: ${title}`,
      async () => {
        const namespace = uniqueNamespace("seg");
        const opened: SegmentStore[] = [];
        const open = async () => {
          const store = await options.create({ namespace });
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

  scenario("lists no tags when empty, then the tags created", async (open) => {
    const store = await open();
    assert.deepEqual(await store.listTags(), []);
    await store.createTag({ tag: "orders", step: 10 });
    await store.createTag({ tag: "users", step: 20, description: "user ids" });
    assert.deepEqual((await store.listTags()).sort(), ["orders", "users"]);
  });

  scenario(
    "hands out consecutive ranges of the stored step, starting at the start id",
    async (open) => {
      const store = await open();
      const created = await store.createTag({ tag: "orders", step: 1000, startId: 5n });
      assert.equal(created.maxId, 5n);
      assert.equal(created.step, 1000);
      const first = await store.takeRange("orders");
      const second = await store.takeRange("orders");
      assert.deepEqual(plain(first), {
        tag: "orders",
        start: 5n,
        end: 1005n,
        step: 1000,
        tableStep: 1000,
      });
      assert.deepEqual(plain(second), {
        tag: "orders",
        start: 1005n,
        end: 2005n,
        step: 1000,
        tableStep: 1000,
      });
    },
  );

  scenario(
    "starts a tag at 1 when no start id is given, as Java Leaf's max_id default",
    async (open) => {
      const store = await open();
      await store.createTag({ tag: "orders", step: 3 });
      const range = await store.takeRange("orders");
      assert.equal(range.start, 1n);
      assert.equal(range.end, 4n);
    },
  );

  scenario("takes a range of the requested step without changing the stored step", async (open) => {
    const store = await open();
    await store.createTag({ tag: "orders", step: 100, startId: 0n });
    const custom = await store.takeRange("orders", 250);
    assert.deepEqual(plain(custom), {
      tag: "orders",
      start: 0n,
      end: 250n,
      step: 250,
      tableStep: 100,
    });
    const normal = await store.takeRange("orders");
    assert.deepEqual([normal.start, normal.end, normal.step], [250n, 350n, 100]);
  });

  scenario("changes a tag's step for the ranges taken after", async (open) => {
    const store = await open();
    await store.createTag({ tag: "orders", step: 100, startId: 0n });
    await store.takeRange("orders");
    const updated = await store.updateStep("orders", 7);
    assert.equal(updated.step, 7);
    assert.equal(updated.maxId, 100n);
    const range = await store.takeRange("orders");
    assert.deepEqual([range.start, range.end, range.step, range.tableStep], [100n, 107n, 7, 7]);
  });

  scenario(
    "describes every tag with its max id, step, description and update time",
    async (open) => {
      const store = await open();
      const before = Date.now();
      await store.createTag({ tag: "b-tag", step: 5, startId: 10n, description: "second" });
      await store.createTag({ tag: "a-tag", step: 2 });
      await store.takeRange("b-tag");
      const records = await store.describeTags();
      assert.deepEqual(
        records.map((r) => [r.tag, r.maxId, r.step, r.description]),
        [
          ["a-tag", 1n, 2, null],
          ["b-tag", 15n, 5, "second"],
        ],
      );
      for (const r of records) {
        assert.ok(
          r.updatedAt === null || Math.abs(r.updatedAt - before) < 120_000,
          `updatedAt ${r.updatedAt}`,
        );
      }
    },
  );

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
    "refuses a range past 2^63 - 1 with SEGMENTS_EXHAUSTED and leaves the tag as it was",
    async (open) => {
      const store = await open();
      await store.createTag({ tag: "edge", step: 10, startId: MAX_ID - 15n });
      const last = await store.takeRange("edge");
      assert.deepEqual([last.start, last.end], [MAX_ID - 15n, MAX_ID - 5n]);
      await assert.rejects(store.takeRange("edge"), (e: unknown) =>
        isLeafError(e, ErrorCodes.SEGMENTS_EXHAUSTED),
      );
      await assert.rejects(store.takeRange("edge", 6), (e: unknown) =>
        isLeafError(e, ErrorCodes.SEGMENTS_EXHAUSTED),
      );
      const fits = await store.takeRange("edge", 5);
      assert.deepEqual([fits.start, fits.end], [MAX_ID - 5n, MAX_ID]);
    },
  );

  // ---- refuses bad ranges/steps ----------------------------------------------------------------

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

  const editRow = options.editRow ?? NOT_DECLARED;
  if (isUnsupported(editRow)) {
    skipUnsupported(test, options.name, "refuses a damaged row and a max id moved back", editRow);
  } else {
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

  scenario("hands out disjoint, gap-free ranges to concurrent takers", async (open) => {
    const store = await open();
    await store.createTag({ tag: "orders", step: 10, startId: 0n });
    const ranges = await Promise.all(
      Array.from({ length: 40 }, (_, i) => store.takeRange("orders", (i % 3) + 1)),
    );
    assertContiguous(ranges, 0n);
  });

  const concurrent = options.concurrentInstances ?? NOT_DECLARED;
  if (isUnsupported(concurrent)) {
    skipUnsupported(test, options.name, "hands out disjoint ranges to two instances", concurrent);
  } else {
    scenario("hands out disjoint ranges to two instances taking at the same time", async (open) => {
      const one = await open();
      const two = await open();
      await one.createTag({ tag: "orders", step: 3, startId: 0n });
      const ranges = (
        await Promise.all([
          Promise.all(Array.from({ length: 30 }, () => one.takeRange("orders"))),
          Promise.all(Array.from({ length: 30 }, () => two.takeRange("orders"))),
        ])
      ).flat();
      assertContiguous(ranges, 0n);
      assert.deepEqual(await two.listTags(), ["orders"]);
    });
  }

  scenario("keeps tags, max ids and steps when closed and opened again", async (open) => {
    const first = await open();
    await first.createTag({ tag: "orders", step: 10, startId: 0n });
    await first.takeRange("orders");
    await first.updateStep("orders", 4);
    await first.close();
    const again = await open();
    assert.deepEqual(await again.listTags(), ["orders"]);
    const range = await again.takeRange("orders");
    assert.deepEqual([range.start, range.end], [10n, 14n]);
  });

  scenario("deletes a tag, and answers false for a tag it does not hold", async (open) => {
    const store = await open();
    await store.createTag({ tag: "orders", step: 10 });
    await store.createTag({ tag: "users", step: 10 });
    assert.equal(await store.deleteTag("orders"), true);
    assert.equal(await store.deleteTag("orders"), false);
    assert.deepEqual(await store.listTags(), ["users"]);
    await assert.rejects(store.takeRange("orders"), (e: unknown) =>
      isLeafError(e, ErrorCodes.UNKNOWN_TAG),
    );
    assert.equal(await store.deleteTag("users"), true);
    assert.deepEqual(await store.listTags(), []);
  });

  scenario("rejects every call after close with CLOSED", async (open) => {
    const store = await open();
    await store.createTag({ tag: "orders", step: 10 });
    await store.close();
    await store.close();
    const closed = (e: unknown) => isLeafError(e, ErrorCodes.CLOSED);
    await assert.rejects(store.takeRange("orders"), closed);
    await assert.rejects(store.listTags(), closed);
    await assert.rejects(store.createTag({ tag: "x", step: 1 }), closed);
  });
}

function plain(range: SegmentRange): SegmentRange {
  return {
    tag: range.tag,
    start: range.start,
    end: range.end,
    step: range.step,
    tableStep: range.tableStep,
  };
}

/** The ranges, sorted, tile [from, ...) without gap or overlap, each `step` long. */
function assertContiguous(ranges: SegmentRange[], from: bigint): void {
  const sorted = [...ranges].sort((a, b) => (a.start < b.start ? -1 : a.start > b.start ? 1 : 0));
  let expected = from;
  for (const r of sorted) {
    assert.equal(r.start, expected, `range [${r.start}, ${r.end}) should start at ${expected}`);
    assert.equal(r.end - r.start, BigInt(r.step));
    expected = r.end;
  }
}
