// The embedded store's give-back under a failed sync: the write queue applies each call once and
// never sends it again, so a give-back that fails is a gap. Its record may be whole in the journal
// though never acknowledged (the sync failed); the store then hands out nothing until it has cut
// the journal back, so the record can count only if no range was handed out after it. Every range
// is checked, in the same process and after a restart.
import { mkdtempSync, rmSync } from "node:fs";
import { type FileHandle, open } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ErrorCodes, isLeafError } from "@leaf/core";
import { afterAll, describe, expect, it } from "vitest";
import { EmbeddedSegmentStore, type SegmentRange } from "../src/index";

const dirs: string[] = [];
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

/** A journal whose next `datasync` fails with EIO once `failSync` is set: the bytes are written. */
function flakySync(): { openFile: (path: string) => Promise<FileHandle>; failNext(): void } {
  let fail = false;
  return {
    failNext: () => {
      fail = true;
    },
    openFile: async (path) => {
      const file = await open(path, "a");
      const datasync = file.datasync.bind(file);
      file.datasync = async () => {
        if (fail) {
          fail = false;
          throw Object.assign(new Error("EIO: i/o error, fdatasync"), { code: "EIO" });
        }
        return datasync();
      };
      return file;
    },
  };
}

function overlapping(ranges: SegmentRange[]): number {
  let found = 0;
  for (const [i, a] of ranges.entries()) {
    for (const b of ranges.slice(i + 1)) if (a.start < b.end && b.start < a.end) found++;
  }
  return found;
}

describe("embedded give-back whose sync fails", () => {
  it("is a gap: the next range starts at the end it compared, never below, also after a restart", async () => {
    const dir = mkdtempSync(join(tmpdir(), "leaf-give-back-sync-"));
    dirs.push(dir);
    const seam = flakySync();
    const store = new EmbeddedSegmentStore({ dir, openFile: seam.openFile });
    await store.createTag({ tag: "t", step: 100, startId: 1n });
    const held = await store.takeRange("t"); // [1, 101), none of it handed out
    seam.failNext();
    await expect(store.giveBack("t", held.start, held.end)).rejects.toSatisfy((e: unknown) =>
      isLeafError(e, ErrorCodes.UNAVAILABLE),
    );
    // The next call repairs the journal (cuts the unacknowledged record off) before serving.
    const next = await store.takeRange("t");
    expect([next.start, next.end]).toEqual([101n, 201n]);
    await store.close();
    const again = new EmbeddedSegmentStore({ dir });
    const afterRestart = await again.takeRange("t");
    await again.close();
    expect([afterRestart.start, afterRestart.end]).toEqual([201n, 301n]);
    expect(overlapping([next, afterRestart])).toBe(0);
  });

  it("counts after a crash only when no range was handed out after it", async () => {
    const dir = mkdtempSync(join(tmpdir(), "leaf-give-back-crash-"));
    dirs.push(dir);
    const seam = flakySync();
    const store = new EmbeddedSegmentStore({ dir, openFile: seam.openFile });
    await store.createTag({ tag: "t", step: 100, startId: 1n });
    const held = await store.takeRange("t");
    seam.failNext();
    await expect(store.giveBack("t", held.start, held.end)).rejects.toSatisfy((e: unknown) =>
      isLeafError(e, ErrorCodes.UNAVAILABLE),
    );
    // Closed before any other call (as a crash would leave it): the whole record is in the file.
    await store.close();
    const again = new EmbeddedSegmentStore({ dir });
    const first = await again.takeRange("t");
    await again.close();
    // The give-back counted: [1, 101) is handed out once, by the restarted store (the closing
    // holder handed out none of it, whatever the answer).
    expect([first.start, first.end]).toEqual([1n, 101n]);
  });
});
