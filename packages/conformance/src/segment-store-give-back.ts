// The give-back group of the segment-store conformance suite: a store that offers the optional
// `giveBack` (a compare-and-set of the max id, so that a graceful restart loses no id) must make it
// only when no range was taken since, durably, and only over ids of its own ranges.
import assert from "node:assert/strict";
import { ErrorCodes, isLeafError } from "@leaf/core";
import type { SegmentStore } from "@leaf/segment";

/** Registers the give-back scenarios through `scenario` (the suite's wrapper of `test`). */
export function giveBackScenarios(
  scenario: (
    title: string,
    body: (open: () => Promise<SegmentStore>, ns: string) => Promise<void>,
  ) => void,
  concurrentInstances: boolean,
): void {
  const giveBackOf = (store: SegmentStore) => {
    assert.equal(
      typeof store.giveBack,
      "function",
      "the adapter declared giveBack but the store has no giveBack method",
    );
    return store.giveBack!.bind(store);
  };

  scenario(
    "gives back the unused end of its last range: the next range starts there, also after a reopen",
    async (open) => {
      const store = await open();
      await store.createTag({ tag: "orders", step: 100, startId: 1n });
      await store.takeRange("orders");
      const second = await store.takeRange("orders");
      // Ids 1 .. 130 were handed out; [131, 201) goes back, across both ranges' seam too.
      assert.equal(await giveBackOf(store)("orders", 131n, second.end), true);
      assert.equal((await store.describeTags())[0]!.maxId, 131n);
      const next = await store.takeRange("orders");
      assert.deepEqual([next.start, next.end], [131n, 231n]);
      assert.equal(await giveBackOf(store)("orders", 200n, next.end), true);
      await store.close();
      const again = await open();
      assert.equal((await again.describeTags())[0]!.maxId, 200n);
      assert.equal((await again.takeRange("orders")).start, 200n);
    },
  );

  scenario(
    "gives nothing back once a later range was taken, and the next range starts above it",
    async (open) => {
      const store = await open();
      await store.createTag({ tag: "orders", step: 10, startId: 0n });
      const mine = await store.takeRange("orders");
      const later = await store.takeRange("orders");
      assert.equal(await giveBackOf(store)("orders", 5n, mine.end), false);
      assert.equal((await store.describeTags())[0]!.maxId, later.end);
      assert.equal((await store.takeRange("orders")).start, later.end);
    },
  );

  if (concurrentInstances) {
    scenario(
      "gives nothing back when another instance took a range after its own",
      async (open) => {
        const a = await open();
        const b = await open();
        await a.createTag({ tag: "orders", step: 10, startId: 0n });
        const mine = await a.takeRange("orders");
        const theirs = await b.takeRange("orders");
        assert.equal(await giveBackOf(a)("orders", 3n, mine.end), false);
        assert.equal((await a.describeTags())[0]!.maxId, theirs.end);
        // Once b gives back its own unused range, the max id is b's to move, not a's.
        assert.equal(await giveBackOf(b)("orders", theirs.start, theirs.end), true);
        assert.equal((await b.takeRange("orders")).start, theirs.start);
      },
    );
  }

  scenario(
    "answers a delete with the max id a re-create may start at, after a give-back lowered the re-created row",
    async (open) => {
      const store = await open();
      await store.createTag({ tag: "orders", step: 100, startId: 1n });
      await store.takeRange("orders");
      const second = await store.takeRange("orders");
      assert.equal((await store.deleteTag("orders"))?.maxId, 201n);
      await store.createTag({ tag: "orders", step: 7, startId: 201n });
      // The holder of [101, 201) gives back its unused end onto the re-created row (max id 201).
      if (await giveBackOf(store)("orders", 150n, second.end)) {
        assert.equal((await store.takeRange("orders")).end, 157n);
      }
      // The row is below the max id the tag was first deleted with: the answer is the higher one,
      // and a re-create at the answer is accepted.
      const deleted = await store.deleteTag("orders");
      assert.equal(deleted?.maxId, 201n);
      assert.equal((await store.createTag({ tag: "orders", step: 7, startId: 201n })).maxId, 201n);
    },
  );

  scenario(
    "refuses to give back ids it never handed out, changing nothing (INVALID_ARGUMENT)",
    async (open) => {
      const store = await open();
      await store.createTag({ tag: "orders", step: 10, startId: 100n });
      await store.createTag({ tag: "users", step: 10, startId: 0n });
      const range = await store.takeRange("orders");
      const invalid = (e: unknown) => isLeafError(e, ErrorCodes.INVALID_ARGUMENT);
      const giveBack = giveBackOf(store);
      // Past the end of its last range, below the start of its ranges, empty or reversed, not
      // bigint.
      await assert.rejects(giveBack("orders", 105n, range.end + 10n), invalid);
      await assert.rejects(giveBack("orders", range.start - 1n, range.end), invalid);
      await assert.rejects(giveBack("orders", range.end, range.end), invalid);
      await assert.rejects(giveBack("orders", 108n, 105n), invalid);
      await assert.rejects(giveBack("orders", 105 as unknown as bigint, range.end), invalid);
      // A tag it took no range of.
      await assert.rejects(giveBack("users", 0n, 10n), invalid);
      assert.deepEqual(
        (await store.describeTags()).map((r) => [r.tag, r.maxId]),
        [
          ["orders", 110n],
          ["users", 0n],
        ],
      );
    },
  );
}
