import {
  appendFileSync,
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
import { ChildLines, runNode, spawnNode } from "@leaf/testkit";
import { afterAll, describe, expect, it, test } from "vitest";
import { EmbeddedSegmentStore, JOURNAL_FILE, LOCK_FILE } from "../src/index";

const root = mkdtempSync(join(tmpdir(), "leaf-segment-embedded-"));
const taker = join(import.meta.dirname, "fixtures", "embedded-taker.ts");
let folders = 0;
const folder = () => join(root, `store-${folders++}`);

afterAll(() => rmSync(root, { recursive: true, force: true }));

segmentStoreConformance(test, {
  name: "embedded store",
  create: ({ namespace }) => EmbeddedSegmentStore.open({ dir: join(root, namespace) }),
  concurrentInstances: { unsupported: "one process at a time owns the data folder (LOCKED)" },
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
    const store = await EmbeddedSegmentStore.open({ dir });
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
      await expect(EmbeddedSegmentStore.open({ dir })).rejects.toSatisfy((e: unknown) =>
        isLeafError(e, ErrorCodes.LOCKED),
      );
    } finally {
      await holder.kill();
    }
    const store = await EmbeddedSegmentStore.open({ dir });
    expect(await store.listTags()).toEqual(["t"]);
    await store.close();
  });

  it("refuses a second store on the same folder in the same process, and frees it on close", async () => {
    const dir = folder();
    const first = await EmbeddedSegmentStore.open({ dir });
    await expect(EmbeddedSegmentStore.open({ dir })).rejects.toSatisfy((e: unknown) =>
      isLeafError(e, ErrorCodes.LOCKED),
    );
    await first.close();
    const second = await EmbeddedSegmentStore.open({ dir });
    await second.close();
  });

  it("refuses a lockStaleAfterMs that is not a positive integer of ms with INVALID_CONFIG", async () => {
    for (const lockStaleAfterMs of [0, -5, 1.5]) {
      await expect(
        EmbeddedSegmentStore.open({ dir: folder(), lockStaleAfterMs }),
      ).rejects.toMatchObject({
        code: ErrorCodes.INVALID_CONFIG,
        details: { key: "lockStaleAfterMs" },
      });
    }
  });

  it("takes over a lock left by a process that is gone, even one with this process's pid", async () => {
    const dir = folder();
    await (await EmbeddedSegmentStore.open({ dir })).close();
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
      const store = await EmbeddedSegmentStore.open({ dir });
      expect(JSON.parse(readFileSync(lock, "utf8")).token).not.toBe("old");
      await store.close();
    }
  });

  it("drops a journal line cut short by a crash, and keeps everything before it", async () => {
    const dir = folder();
    const store = await EmbeddedSegmentStore.open({ dir });
    await store.createTag({ tag: "t", step: 10, startId: 0n });
    await store.takeRange("t");
    await store.close();
    const journal = join(dir, JOURNAL_FILE);
    const size = statSync(journal).size;
    appendFileSync(journal, '{"op":"max","tag":"t","maxId":"99');
    const reopened = await EmbeddedSegmentStore.open({ dir });
    expect(statSync(journal).size).toBe(size);
    expect((await reopened.takeRange("t")).start).toBe(10n);
    await reopened.close();
  });

  it("refuses a journal damaged before its end with CORRUPT_DATA naming the line", async () => {
    const dir = folder();
    const store = await EmbeddedSegmentStore.open({ dir });
    await store.createTag({ tag: "t", step: 10 });
    await store.takeRange("t");
    await store.close();
    const journal = join(dir, JOURNAL_FILE);
    const lines = readFileSync(journal, "utf8").split("\n");
    lines[1] = "garbage";
    writeFileSync(journal, lines.join("\n"));
    await expect(EmbeddedSegmentStore.open({ dir })).rejects.toSatisfy(
      (e: unknown) =>
        isLeafError(e, ErrorCodes.CORRUPT_DATA) && /line 2/.test((e as Error).message),
    );
    // The refused journal is left as it was, for a backup to be restored over it.
    expect(readFileSync(journal, "utf8")).toBe(lines.join("\n"));
  });

  it("compacts the journal to one line per tag and keeps every max id", async () => {
    const dir = folder();
    const store = await EmbeddedSegmentStore.open({ dir, compactAfterRecords: 20 });
    await store.createTag({ tag: "a", step: 1, startId: 0n });
    await store.createTag({ tag: "b", step: 2, startId: 0n });
    for (let i = 0; i < 100; i++) await Promise.all([store.takeRange("a"), store.takeRange("b")]);
    await store.close();
    const lines = readFileSync(join(dir, JOURNAL_FILE), "utf8").trim().split("\n");
    expect(lines.length).toBeLessThan(25);
    const reopened = await EmbeddedSegmentStore.open({ dir });
    expect((await reopened.describeTags()).map((r) => [r.tag, r.maxId])).toEqual([
      ["a", 100n],
      ["b", 200n],
    ]);
    await reopened.close();
  });

  it("refuses a missing data folder, or a file in its place, with INVALID_CONFIG naming it", async () => {
    await expect(EmbeddedSegmentStore.open({ dir: "" })).rejects.toSatisfy((e: unknown) =>
      isLeafError(e, ErrorCodes.INVALID_CONFIG),
    );
    const file = join(root, "a-file");
    writeFileSync(file, "not a folder");
    await expect(EmbeddedSegmentStore.open({ dir: file })).rejects.toSatisfy(
      (e: unknown) =>
        isLeafError(e, ErrorCodes.INVALID_CONFIG) && (e as Error).message.includes(file),
    );
  });
});
