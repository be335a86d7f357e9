// The conformance suite every segment store runs unchanged: ours (MySQL, embedded, memory) and
// third parties'. It takes vitest's `test` so that it registers real tests in the store's own test
// file, and uses node:assert, so the package needs no test framework at run time. It imports only
// types from @leaf/segment: loading it never loads the segment package. This file holds the
// options, the ranges a store hands out and keeps, and the order of the groups kept apart
// (segment-store-*.ts).
import assert from "node:assert/strict";
import { ErrorCodes, isLeafError } from "@leaf/core";
import type { SegmentRange, SegmentStore } from "@leaf/segment";
import { giveBackScenarios } from "./segment-store-give-back";
import {
  damagedRowScenarios,
  type EditRow,
  floorScenarios,
  limitScenarios,
} from "./segment-store-limits";
import { assertContiguous, scenarioOf } from "./segment-store-scenario";
import {
  type Capability,
  type ConformanceContext,
  isUnsupported,
  NOT_DECLARED,
  skipUnsupported,
  type TestFunction,
} from "./shared";

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
  editRow?: Capability<EditRow>;
  /**
   * The store implements the optional `giveBack` (a compare-and-set of the max id on a graceful
   * close); stores that do not say so with `{ unsupported }` (generators then lose the unused ids
   * of a restart, as Java Leaf does).
   */
  giveBack?: Capability<true>;
  /**
   * The store checks `takeRange`'s optional `floor` (a restarted node's high-water mark) as it
   * checks the ranges it handed out: below it, CORRUPT_DATA and nothing moved. A store that
   * ignores it says why with `{ unsupported }` (the generator then refuses the range it answered
   * and serves the tag again only after a restart).
   */
  floor?: Capability<true>;
  /** Per-test time limit in ms (default 30,000). */
  timeoutMs?: number;
}

/**
 * Registers the segment-store conformance tests with vitest's `test`:
 *
 * ```ts
 * import { segmentStoreConformance } from "@leaf/conformance/segment-store";
 * import { test } from "vitest";
 * segmentStoreConformance(test, { name: "my store", create: ({ namespace }) =>
 * openMyStore(namespace) });
 * ```
 */
export function segmentStoreConformance(
  test: TestFunction,
  options: SegmentStoreConformanceOptions,
): void {
  const scenario = scenarioOf(test, options.name, options.create, options.timeoutMs ?? 30_000);

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

  limitScenarios(scenario);

  const editRow = options.editRow ?? NOT_DECLARED;
  if (isUnsupported(editRow)) {
    skipUnsupported(test, options.name, "refuses a damaged row and a max id moved back", editRow);
  } else {
    damagedRowScenarios(scenario, editRow);
  }

  const floor = options.floor ?? NOT_DECLARED;
  if (isUnsupported(floor)) {
    skipUnsupported(test, options.name, "refuses a range below the caller's floor", floor);
  } else {
    floorScenarios(scenario);
  }

  scenario("hands out disjoint, gap-free ranges to concurrent takers", async (open) => {
    const store = await open();
    await store.createTag({ tag: "orders", step: 10, startId: 0n });
    const ranges = await Promise.all(
      Array.from({ length: 40 }, (_, i) => store.takeRange("orders", (i % 3) + 1)),
    );
    assertContiguous(ranges, 0n);
  });

  const giveBack = options.giveBack ?? NOT_DECLARED;
  if (isUnsupported(giveBack)) {
    skipUnsupported(test, options.name, "gives back unused ids when safe", giveBack);
  } else {
    giveBackScenarios(scenario, !isUnsupported(options.concurrentInstances ?? NOT_DECLARED));
  }

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

  scenario("remembers a deleted tag's max id when closed and opened again", async (open) => {
    const first = await open();
    await first.createTag({ tag: "orders", step: 10, startId: 0n });
    await first.takeRange("orders");
    await first.deleteTag("orders");
    await first.close();
    const again = await open();
    await assert.rejects(again.createTag({ tag: "orders", step: 10, startId: 9n }), (e: unknown) =>
      isLeafError(e, ErrorCodes.ALREADY_EXISTS),
    );
    assert.equal((await again.createTag({ tag: "orders", step: 10, startId: 10n })).maxId, 10n);
  });

  scenario(
    "deletes a tag, answering its final max id, and undefined for a tag it does not hold",
    async (open) => {
      const store = await open();
      await store.createTag({ tag: "orders", step: 10 });
      await store.createTag({ tag: "users", step: 10 });
      await store.takeRange("orders");
      const deleted = await store.deleteTag("orders");
      assert.equal(deleted?.tag, "orders");
      assert.equal(deleted?.maxId, 11n);
      assert.equal(await store.deleteTag("orders"), undefined);
      assert.deepEqual(await store.listTags(), ["users"]);
      await assert.rejects(store.takeRange("orders"), (e: unknown) =>
        isLeafError(e, ErrorCodes.UNKNOWN_TAG),
      );
      assert.equal((await store.deleteTag("users"))?.maxId, 1n);
      assert.deepEqual(await store.listTags(), []);
    },
  );

  scenario(
    "creates a deleted tag again only at or above the max id it was deleted with",
    async (open) => {
      const store = await open();
      await store.createTag({ tag: "orders", step: 10, startId: 100n });
      await store.takeRange("orders");
      await store.takeRange("orders");
      assert.equal((await store.deleteTag("orders"))?.maxId, 120n);
      for (const startId of [1n, 119n]) {
        await assert.rejects(
          store.createTag({ tag: "orders", step: 10, startId }),
          (e: unknown) =>
            isLeafError(e, ErrorCodes.ALREADY_EXISTS) &&
            (e as { details?: { reason?: unknown; minStartId?: unknown } }).details?.reason ===
              "deleted" &&
            (e as { details?: { minStartId?: unknown } }).details?.minStartId === "120",
        );
      }
      assert.deepEqual(await store.listTags(), []);
      assert.equal((await store.createTag({ tag: "orders", step: 10, startId: 120n })).maxId, 120n);
      const range = await store.takeRange("orders");
      assert.deepEqual([range.start, range.end], [120n, 130n]);
      // Deleted again, the store keeps the higher max id.
      assert.equal((await store.deleteTag("orders"))?.maxId, 130n);
      await assert.rejects(
        store.createTag({ tag: "orders", step: 10, startId: 125n }),
        (e: unknown) => isLeafError(e, ErrorCodes.ALREADY_EXISTS),
      );
    },
  );

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
