// The embedded store remembers the max id each tag was deleted with, through compaction and a
// restart, so that a tag created again never starts below an id its old ranges handed out; and the
// journal stays readable as before (a `delete` record that carries the max id).
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ErrorCodes, isLeafError } from "@leaf/core";
import { afterAll, describe, expect, it } from "vitest";
import { EmbeddedSegmentStore, JOURNAL_FILE } from "../src/index";

const dirs: string[] = [];
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

function folder(): string {
  const dir = mkdtempSync(join(tmpdir(), "leaf-deleted-tags-"));
  dirs.push(dir);
  return dir;
}

const belowDeleted = (minStartId: string) => (e: unknown) =>
  isLeafError(e, ErrorCodes.ALREADY_EXISTS) &&
  (e as { details?: { reason?: unknown } }).details?.reason === "deleted" &&
  (e as { details?: { minStartId?: unknown } }).details?.minStartId === minStartId;

describe("deleted tags in the embedded store", () => {
  it("keeps the highest max id a tag was deleted with through compactions and restarts", async () => {
    const dir = folder();
    const first = new EmbeddedSegmentStore({ dir, compactAfterRecords: 3 });
    await first.createTag({ tag: "t", step: 10, startId: 1n });
    for (let i = 0; i < 5; i++) await first.takeRange("t"); // max id 51
    expect((await first.deleteTag("t"))?.maxId).toBe(51n);
    await first.createTag({ tag: "t", step: 10, startId: 60n });
    expect((await first.deleteTag("t"))?.maxId).toBe(60n); // deleted again lower than the first
    // Enough records for several compactions.
    await first.createTag({ tag: "other", step: 1 });
    for (let i = 0; i < 10; i++) await first.takeRange("other");
    await first.close();
    const journal = readFileSync(join(dir, JOURNAL_FILE), "utf8");
    expect(journal).toContain('"op":"delete","tag":"t"');

    const again = new EmbeddedSegmentStore({ dir });
    try {
      await expect(again.createTag({ tag: "t", step: 10, startId: 59n })).rejects.toSatisfy(
        belowDeleted("60"),
      );
      expect(await again.listTags()).toEqual(["other"]);
      const created = await again.createTag({ tag: "t", step: 10, startId: 60n });
      expect(created.maxId).toBe(60n);
      const range = await again.takeRange("t");
      expect([range.start, range.end]).toEqual([60n, 70n]);
    } finally {
      await again.close();
    }
  });

  it("answers the record as deleted, with every range taken before the delete inside its max id", async () => {
    const store = new EmbeddedSegmentStore({ dir: folder() });
    try {
      await store.createTag({ tag: "t", step: 7, startId: 0n });
      // Ranges and the delete queued together: the delete's answer covers every range before it.
      const ranges = [store.takeRange("t"), store.takeRange("t"), store.takeRange("t")];
      const deleted = store.deleteTag("t");
      const after = store.takeRange("t").catch((e: unknown) => e);
      const ends = (await Promise.all(ranges)).map((r) => r.end);
      expect((await deleted)?.maxId).toBe(ends.reduce((a, b) => (a > b ? a : b)));
      expect(await after).toSatisfy((e: unknown) => isLeafError(e, ErrorCodes.UNKNOWN_TAG));
    } finally {
      await store.close();
    }
  });
});
