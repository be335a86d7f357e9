import {
  appendFileSync,
  existsSync,
  mkdtempSync,
  readFileSync,
  readlinkSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { segmentStoreConformance } from "@leaf/conformance/segment-store";
import { ErrorCodes, isLeafError } from "@leaf/core";
import { ChildLines, runNode, spawnNode, started } from "@leaf/testkit";
import { afterAll, describe, expect, it, test } from "vitest";
import { EmbeddedSegmentStore, JOURNAL_FILE, LOCK_FILE } from "../src/index";

const root = mkdtempSync(join(tmpdir(), "leaf-segment-embedded-"));
const taker = join(import.meta.dirname, "fixtures", "embedded-taker.ts");
let folders = 0;
const folder = () => join(root, `store-${folders++}`);

afterAll(() => rmSync(root, { recursive: true, force: true }));

segmentStoreConformance(test, {
  name: "embedded store",
  create: ({ namespace }) => started(new EmbeddedSegmentStore({ dir: join(root, namespace) })),
  concurrentInstances: { unsupported: "one process at a time owns the data folder (LOCKED)" },
  giveBack: true,
  floor: true,
  editRow: {
    unsupported:
      "the open store owns its folder and never re-reads its journal: no one can edit a row under it",
  },
});

describe("EmbeddedSegmentStore", () => {
  it("never hands out a range again after the process holding it is SIGKILLed", async () => {
    const dir = folder();
    const handedOut: [bigint, bigint][] = [];
    for (let round = 0; round < 3; round++) {
      const child = new ChildLines(spawnNode(taker, [dir]));
      await child.until(
        (l) => l.filter((x) => /^\d+ \d+$/.test(x)).length >= 300 + round * 37,
        "ranges taken",
      );
      await child.kill();
      for (const line of child.lines) {
        const m = /^(\d+) (\d+)$/.exec(line);
        if (m) handedOut.push([BigInt(m[1]!), BigInt(m[2]!)]);
      }
    }
    let highest = 0n;
    for (const [, end] of handedOut) if (end > highest) highest = end;
    const store = await started(new EmbeddedSegmentStore({ dir }));
    try {
      const next = await store.takeRange("t");
      expect(next.start).toBeGreaterThanOrEqual(highest);
    } finally {
      await store.close();
    }
    handedOut.sort((a, b) => (a[0] < b[0] ? -1 : 1));
    for (let i = 1; i < handedOut.length; i++)
      expect(handedOut[i]![0]).toBeGreaterThanOrEqual(handedOut[i - 1]![1]);
  });

  it("refuses a second process on the same folder with LOCKED, naming the holder", async () => {
    const dir = folder();
    const holder = new ChildLines(spawnNode(taker, [dir, "hold"]));
    try {
      await holder.until((lines) => lines.includes("ready"), "ready");
      const second = await runNode(taker, [dir]);
      expect(second.code).toBe(1);
      expect(second.stdout).toContain(`error ${ErrorCodes.LOCKED}`);
      expect(second.stdout).toContain(`pid ${holder.child.pid}`);
      await expect(new EmbeddedSegmentStore({ dir }).start()).rejects.toSatisfy((e: unknown) =>
        isLeafError(e, ErrorCodes.LOCKED),
      );
    } finally {
      await holder.kill();
    }
    const store = await started(new EmbeddedSegmentStore({ dir }));
    expect(await store.listTags()).toEqual(["t"]);
    await store.close();
  });

  it("touches nothing on disk until started; the first call starts it; a refused start is tried again", async () => {
    const dir = folder();
    const lazy = new EmbeddedSegmentStore({ dir });
    expect(existsSync(dir)).toBe(false);
    expect(await lazy.listTags()).toEqual([]);
    expect(existsSync(join(dir, LOCK_FILE))).toBe(true);
    await Promise.all([lazy.start(), lazy.start()]);
    const second = new EmbeddedSegmentStore({ dir });
    await expect(second.createTag({ tag: "t", step: 10 })).rejects.toSatisfy((e: unknown) =>
      isLeafError(e, ErrorCodes.LOCKED),
    );
    await lazy.close();
    // The refused store opens once the folder is free, and saw nothing of its refused call.
    expect(await second.listTags()).toEqual([]);
    await second.close();
    // Closed before it started: nothing to release, and no start afterwards.
    const never = new EmbeddedSegmentStore({ dir: folder() });
    await never.close();
    await expect(never.listTags()).rejects.toSatisfy((e: unknown) =>
      isLeafError(e, ErrorCodes.CLOSED),
    );
  });

  it("refuses a second store on the same folder in the same process, and frees it on close", async () => {
    const dir = folder();
    const first = await started(new EmbeddedSegmentStore({ dir }));
    await expect(new EmbeddedSegmentStore({ dir }).start()).rejects.toSatisfy((e: unknown) =>
      isLeafError(e, ErrorCodes.LOCKED),
    );
    await first.close();
    const second = await started(new EmbeddedSegmentStore({ dir }));
    await second.close();
  });

  it("refuses a lockStaleAfterMs that is not a positive integer of ms with INVALID_CONFIG", async () => {
    for (const lockStaleAfterMs of [0, -5, 1.5]) {
      expect(() => new EmbeddedSegmentStore({ dir: folder(), lockStaleAfterMs })).toThrow(
        expect.objectContaining({
          code: ErrorCodes.INVALID_CONFIG,
          details: expect.objectContaining({ key: "lockStaleAfterMs" }),
        }),
      );
    }
  });

  it("takes over a lock left by a process that is gone, even one with this process's pid", async () => {
    const dir = folder();
    await (await started(new EmbeddedSegmentStore({ dir }))).close();
    const lock = join(dir, LOCK_FILE);
    for (const pid of [process.pid, 2 ** 22 + 12_345]) {
      writeFileSync(
        lock,
        JSON.stringify({
          pid,
          host: (await import("node:os")).hostname(),
          // Same boot and PID namespace: only then does a pid prove anything.
          bootId: readFileSync("/proc/sys/kernel/random/boot_id", "utf8").trim(),
          pidNamespace: readlinkSync("/proc/self/ns/pid"),
          token: "old",
          startedAt: 0,
        }),
      );
      const store = await started(new EmbeddedSegmentStore({ dir }));
      expect(JSON.parse(readFileSync(lock, "utf8")).token).not.toBe("old");
      await store.close();
    }
  });

  it("drops a journal line cut short by a crash, and keeps everything before it", async () => {
    const dir = folder();
    const store = await started(new EmbeddedSegmentStore({ dir }));
    await store.createTag({ tag: "t", step: 10, startId: 0n });
    await store.takeRange("t");
    await store.close();
    const journal = join(dir, JOURNAL_FILE);
    const size = statSync(journal).size;
    appendFileSync(journal, '{"op":"max","tag":"t","maxId":"99');
    const reopened = await started(new EmbeddedSegmentStore({ dir }));
    expect(statSync(journal).size).toBe(size);
    expect((await reopened.takeRange("t")).start).toBe(10n);
    await reopened.close();
  });

  it("replays a give-back only where its writer found the tag: one appended late, after another holder's range, is a gap", async () => {
    const dir = folder();
    const store = await started(new EmbeddedSegmentStore({ dir }));
    await store.createTag({ tag: "t", step: 10, startId: 0n });
    await store.takeRange("t"); // [0, 10): this holder's
    await store.close();
    const journal = join(dir, JOURNAL_FILE);
    const at = Date.now();
    // What a holder paused past a lock takeover leaves: the new holder took [10, 20), then the old
    // one's give-back of [5, 10), checked against max id 10 before the pause, was appended after it.
    appendFileSync(
      journal,
      `${JSON.stringify({ op: "max", tag: "t", maxId: "20", at })}\n` +
        `${JSON.stringify({ op: "put", tag: "t", maxId: "5", step: 10, description: null, at, back: "10" })}\n`,
    );
    const reopened = await started(new EmbeddedSegmentStore({ dir }));
    // Applied, the give-back would start the next range at 5 and hand out [10, 20) again.
    expect((await reopened.takeRange("t")).start).toBe(20n);
    await reopened.close();
  });

  it("refuses a journal damaged before its end with CORRUPT_DATA naming the line", async () => {
    const dir = folder();
    const store = await started(new EmbeddedSegmentStore({ dir }));
    await store.createTag({ tag: "t", step: 10 });
    await store.takeRange("t");
    await store.close();
    const journal = join(dir, JOURNAL_FILE);
    const lines = readFileSync(journal, "utf8").split("\n");
    lines[1] = "garbage";
    writeFileSync(journal, lines.join("\n"));
    await expect(new EmbeddedSegmentStore({ dir }).start()).rejects.toSatisfy(
      (e: unknown) =>
        isLeafError(e, ErrorCodes.CORRUPT_DATA) && /line 2/.test((e as Error).message),
    );
    // The refused journal is left as it was, for a backup to be restored over it.
    expect(readFileSync(journal, "utf8")).toBe(lines.join("\n"));
  });

  it("compacts the journal to one line per tag and keeps every max id", async () => {
    const dir = folder();
    const store = await started(new EmbeddedSegmentStore({ dir, compactAfterRecords: 20 }));
    await store.createTag({ tag: "a", step: 1, startId: 0n });
    await store.createTag({ tag: "b", step: 2, startId: 0n });
    for (let i = 0; i < 100; i++) await Promise.all([store.takeRange("a"), store.takeRange("b")]);
    await store.close();
    const lines = readFileSync(join(dir, JOURNAL_FILE), "utf8").trim().split("\n");
    expect(lines.length).toBeLessThan(25);
    const reopened = await started(new EmbeddedSegmentStore({ dir }));
    expect((await reopened.describeTags()).map((r) => [r.tag, r.maxId])).toEqual([
      ["a", 100n],
      ["b", 200n],
    ]);
    await reopened.close();
  });

  it("refuses a missing data folder, or a file in its place, with INVALID_CONFIG naming it", async () => {
    expect(() => new EmbeddedSegmentStore({ dir: "" })).toThrow(
      expect.objectContaining({ code: ErrorCodes.INVALID_CONFIG }),
    );
    const file = join(root, "a-file");
    writeFileSync(file, "not a folder");
    await expect(new EmbeddedSegmentStore({ dir: file }).start()).rejects.toSatisfy(
      (e: unknown) =>
        isLeafError(e, ErrorCodes.INVALID_CONFIG) && (e as Error).message.includes(file),
    );
  });
});
