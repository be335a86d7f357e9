// The embedded store under real faults: a file size limit (RLIMIT_FSIZE) and a full disk (a small
// tmpfs) that cut writes short, a compaction whose reopen fails (EMFILE), a second process in
// another PID namespace (unshare --pid) and a paused holder (SIGSTOP) whose folder another host
// takes (unshare --uts). Every range any process printed is counted: no id may be handed out twice.
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import {
  closeSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readFileSync,
  rmSync,
  unlinkSync,
  writeFileSync,
  writeSync,
} from "node:fs";
import { type FileHandle, open } from "node:fs/promises";
import { createRequire } from "node:module";
import { hostname, tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { segmentStoreDurabilityConformance } from "@leaf/conformance/segment-store";
import { ErrorCodes, type LeafError } from "@leaf/core";
import { readLockFile } from "@leaf/core/adapter";
import { ChildLines, started, waitUntilStopped } from "@leaf/testkit";
import { afterAll, describe, expect, it, test } from "vitest";
import { EmbeddedSegmentStore, JOURNAL_FILE, LOCK_FILE, type SegmentRange } from "../src/index";

const root = mkdtempSync(join(tmpdir(), "leaf-segment-faults-"));
const tsx = pathToFileURL(createRequire(import.meta.url).resolve("tsx")).href;
const faultTaker = join(import.meta.dirname, "fixtures", "embedded-fault-taker.ts");
let folders = 0;
const folder = () => join(root, `store-${folders++}`);
const children = new Set<ChildLines>();
const mounts: string[] = [];

afterAll(async () => {
  for (const child of children) {
    child.child.kill("SIGCONT");
    await child.kill();
  }
  for (const mount of mounts) execFileSync("umount", ["-l", mount]);
  rmSync(root, { recursive: true, force: true });
});

/** Settings of the fixture (see fixtures/embedded-fault-taker.ts). */
interface TakerSettings {
  compactAfter?: number;
  lockStaleAfterMs?: number;
  failOpens?: [number, number];
  retryOpenMs?: number;
  pauseMs?: number;
}

/** Starts the fault taker on `dir`, under `wrapper` (prlimit, unshare) when given. */
function startTaker(dir: string, settings: TakerSettings = {}, wrapper: string[] = []): ChildLines {
  const command = [process.execPath, "--import", tsx, faultTaker, dir, JSON.stringify(settings)];
  const [program, ...args] = [...wrapper, ...command];
  const child: ChildProcess = spawn(program!, args, { stdio: ["ignore", "pipe", "inherit"] });
  const lines = new ChildLines(child);
  children.add(lines);
  return lines;
}

async function stop(child: ChildLines): Promise<void> {
  child.child.kill("SIGCONT");
  await child.kill();
  children.delete(child);
}

type Range = [bigint, bigint];

function rangesIn(lines: readonly string[]): Range[] {
  return lines.flatMap((line) => {
    const m = /^(\d+) (\d+)$/.exec(line);
    return m ? [[BigInt(m[1]!), BigInt(m[2]!)] as Range] : [];
  });
}

const errorsIn = (lines: readonly string[]) => lines.filter((l) => l.startsWith("error "));
const asRange = (r: SegmentRange): Range => [r.start, r.end];

/** How many ids were handed out more than once among `ranges`. */
function duplicateIds(ranges: Range[]): bigint {
  const sorted = [...ranges].sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
  let duplicates = 0n;
  let reach = -1n;
  for (const [start, end] of sorted) {
    if (start < reach) duplicates += (end < reach ? end : reach) - start;
    if (end > reach) reach = end;
  }
  return duplicates;
}

/** Mounts a tmpfs of `size` bytes (root only): a disk that fills up for real. */
function mountTmpfs(size: string): string {
  const dir = folder();
  mkdirSync(dir, { recursive: true });
  execFileSync("mount", ["-t", "tmpfs", "-o", `size=${size}`, "tmpfs", dir]);
  mounts.push(dir);
  return dir;
}

/** Fills the file system of `dir` with a file until writes fail with ENOSPC; returns the file. */
function fillDisk(dir: string): string {
  const filler = join(dir, "filler");
  const fd = openSync(filler, "w");
  const chunk = Buffer.alloc(4096, 0x78);
  try {
    for (;;) writeSync(fd, chunk);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "ENOSPC") throw error;
  } finally {
    closeSync(fd);
  }
  return filler;
}

/** Reopens the folder, takes `count` ranges and closes it again. */
async function takeAfterRestart(dir: string, count: number): Promise<Range[]> {
  const store = await started(new EmbeddedSegmentStore({ dir }));
  try {
    const taken: Range[] = [];
    for (let i = 0; i < count; i++) taken.push(asRange(await store.takeRange("t")));
    return taken;
  } finally {
    await store.close();
  }
}

/**
 * Checks the journal has no NUL bytes (a truncate past its real end pads with them) and, when
 * `complete`, ends with a complete line (after a crash it may end in a torn, unacknowledged one).
 */
function expectCleanJournal(dir: string, complete: boolean): void {
  const journal = readFileSync(join(dir, JOURNAL_FILE));
  expect(journal.includes(0), "the journal holds NUL bytes").toBe(false);
  if (complete) expect(journal.at(-1)).toBe(0x0a);
}

const tmpfsByNamespace = new Map<string, string>();
const tmpfsFor = (namespace: string) => {
  if (!tmpfsByNamespace.has(namespace)) tmpfsByNamespace.set(namespace, mountTmpfs("256k"));
  return tmpfsByNamespace.get(namespace)!;
};

segmentStoreDurabilityConformance(test, {
  name: "embedded store on a small tmpfs",
  create: ({ namespace }) => started(new EmbeddedSegmentStore({ dir: tmpfsFor(namespace) })),
  induceWriteFault: async ({ namespace }) => {
    const filler = fillDisk(tmpfsFor(namespace));
    return { end: async () => unlinkSync(filler) };
  },
});

describe("EmbeddedSegmentStore on a full disk", () => {
  it("never acknowledges a write cut short by a file size limit (RLIMIT_FSIZE), and never reissues a range after a restart", async () => {
    const dir = folder();
    const limit = 16_411;
    const child = startTaker(dir, { pauseMs: 0 }, ["prlimit", `--fsize=${limit}`, "--"]);
    await child.until((lines) => errorsIn(lines).length >= 6, "refusals at the file size limit");
    await stop(child);
    const handedOut = rangesIn(child.lines);
    const journal = readFileSync(join(dir, JOURNAL_FILE));
    const after = await takeAfterRestart(dir, 3);
    expect(duplicateIds([...handedOut, ...after])).toBe(0n);
    expect(handedOut.length).toBeGreaterThan(50);
    expect(journal.length).toBeLessThanOrEqual(limit);
    expect(journal.includes(0), "the journal holds NUL bytes").toBe(false);
    expectCleanJournal(dir, true);
    const errors = errorsIn(child.lines);
    expect(errors[0]).toContain(`error ${ErrorCodes.UNAVAILABLE}`);
    expect(errors[0]).toContain(join(dir, JOURNAL_FILE));
    expect(errors[0]).toContain("file size limit");
  });

  it("refuses every call while a tmpfs is full, naming the journal, and serves on from the last range once space is freed", async () => {
    const dir = mountTmpfs("256k");
    const failures: LeafError[] = [];
    const store = await started(
      new EmbeddedSegmentStore({ dir, onFailure: (e) => failures.push(e) }),
    );
    await store.createTag({ tag: "t", step: 100, startId: 1n });
    const filler = fillDisk(dir);
    const handedOut: Range[] = [];
    let refusal: LeafError | undefined;
    while (!refusal) {
      const results = await Promise.allSettled([0, 1, 2].map(() => store.takeRange("t")));
      for (const result of results) {
        if (result.status === "fulfilled") handedOut.push(asRange(result.value));
        else refusal ??= result.reason as LeafError;
      }
    }
    expect(refusal.code).toBe(ErrorCodes.UNAVAILABLE);
    expect(refusal.message).toContain(join(dir, JOURNAL_FILE));
    expect(refusal.message).toContain("the disk is full (ENOSPC");
    expect(failures[0]).toBe(refusal);
    // Still full: every call is refused, again and again.
    for (let i = 0; i < 3; i++) {
      await expect(store.takeRange("t")).rejects.toMatchObject({ code: ErrorCodes.UNAVAILABLE });
    }
    expect(store.stats()).toMatchObject({
      lost: false,
      refusing: expect.stringContaining("ENOSPC"),
    });
    unlinkSync(filler);
    // Writable again: the journal is verified and the next range starts where the last one ended.
    let highest = 0n;
    for (const [, end] of handedOut) if (end > highest) highest = end;
    const next = asRange(await store.takeRange("t"));
    expect(next[0]).toBe(highest);
    expect(store.stats()).toMatchObject({ refusing: undefined, lost: false });
    expect(store.stats().recoveries).toBeGreaterThanOrEqual(1);
    await store.close();
    expectCleanJournal(dir, true);
    const after = await takeAfterRestart(dir, 1);
    expect(after[0]![0]).toBe(next[1]);
    expect(duplicateIds([...handedOut, next, ...after])).toBe(0n);
  });

  it("refuses to open on a full disk as an outage (UNAVAILABLE), not as a wrong setting", async () => {
    const dir = mountTmpfs("256k");
    const first = await started(new EmbeddedSegmentStore({ dir }));
    await first.createTag({ tag: "t", step: 100, startId: 1n });
    await first.close();
    fillDisk(dir);
    const error = await started(new EmbeddedSegmentStore({ dir })).then(
      async (store) => {
        await store.close();
        return undefined;
      },
      (e: unknown) => e as LeafError,
    );
    expect(error?.code).toBe(ErrorCodes.UNAVAILABLE);
    expect(error?.message).toContain("the disk is full");
    expect(error?.message).toContain(dir);
  });

  it("never reissues a range after a process refused on a full tmpfs is SIGKILLed", async () => {
    const dir = mountTmpfs("256k");
    const child = startTaker(dir, { pauseMs: 2 });
    await child.until((lines) => rangesIn(lines).length >= 30, "ranges taken");
    const filler = fillDisk(dir);
    await child.until((lines) => errorsIn(lines).length >= 6, "refusals on the full disk");
    await stop(child);
    unlinkSync(filler);
    const journal = readFileSync(join(dir, JOURNAL_FILE));
    const after = await takeAfterRestart(dir, 3);
    expect(duplicateIds([...rangesIn(child.lines), ...after])).toBe(0n);
    expect(journal.includes(0), "the journal holds NUL bytes").toBe(false);
    expectCleanJournal(dir, true);
    expect(errorsIn(child.lines)[0]).toContain("ENOSPC");
  });
});

describe("EmbeddedSegmentStore when compaction cannot reopen the journal", () => {
  it("hands out nothing after the reopen failed (EMFILE), and never reissues a range after a crash", async () => {
    const dir = folder();
    // Every open after the first fails: the store must not go on appending to the replaced file.
    const child = startTaker(dir, { compactAfter: 30, failOpens: [2, 1_000_000], pauseMs: 2 });
    // Compaction (and its failed reopen) comes every 30 records: 315 answers see it several times.
    await child.until((lines) => lines.length >= 315, "answers before and after the failed reopen");
    await stop(child);
    const after = await takeAfterRestart(dir, 3);
    expect(duplicateIds([...rangesIn(child.lines), ...after])).toBe(0n);
    const errors = errorsIn(child.lines);
    expect(errors[0]).toContain(`error ${ErrorCodes.UNAVAILABLE}`);
    expect(errors[0]).toContain("could not reopen the journal");
    expect(errors[0]).toContain("EMFILE");
    // Nothing was handed out after the first refusal.
    const firstError = child.lines.indexOf(errors[0]!);
    expect(rangesIn(child.lines.slice(firstError))).toEqual([]);
  });

  it("serves again once it has reopened and verified the journal, appending to the file at the path", async () => {
    const dir = folder();
    let failing = false;
    const openFile = async (path: string): Promise<FileHandle> => {
      if (failing) {
        throw Object.assign(new Error(`EMFILE: too many open files, open '${path}'`), {
          code: "EMFILE",
        });
      }
      return open(path, "a");
    };
    const store = await started(
      new EmbeddedSegmentStore({ dir, compactAfterRecords: 10, openFile }),
    );
    await store.createTag({ tag: "t", step: 10, startId: 0n });
    failing = true;
    const handedOut: Range[] = [];
    let refusal: LeafError | undefined;
    // The first compaction comes within 10 records; give it plenty.
    for (let i = 0; i < 100 && !refusal; i++) {
      try {
        handedOut.push(asRange(await store.takeRange("t")));
      } catch (error) {
        refusal = error as LeafError;
      }
    }
    expect(refusal).toMatchObject({ code: ErrorCodes.UNAVAILABLE });
    await expect(store.takeRange("t")).rejects.toMatchObject({ code: ErrorCodes.UNAVAILABLE });
    failing = false;
    const next = asRange(await store.takeRange("t"));
    expect(next[0]).toBe(handedOut.at(-1)![1]);
    // The range is in the journal at the path, not in an unlinked file.
    const lines = readFileSync(join(dir, JOURNAL_FILE), "utf8").trim().split("\n");
    expect(JSON.parse(lines.at(-1)!)).toMatchObject({ op: "max", maxId: String(next[1]) });
    await store.close();
    const after = await takeAfterRestart(dir, 1);
    expect(after[0]![0]).toBe(next[1]);
    expect(duplicateIds([...handedOut, next, ...after])).toBe(0n);
  });
});

describe("EmbeddedSegmentStore and other processes on its folder", () => {
  it("stops handing out ranges once its lock file is no longer its own, and leaves the new one alone", async () => {
    const dir = folder();
    const failures: LeafError[] = [];
    const store = await started(
      new EmbeddedSegmentStore({ dir, onFailure: (e) => failures.push(e) }),
    );
    await store.createTag({ tag: "t", step: 10, startId: 0n });
    await store.takeRange("t");
    const lock = join(dir, LOCK_FILE);
    const intruder = `${readFileSync(lock, "utf8").replace(/"token":"[^"]+"/, '"token":"intruder"')}`;
    rmSync(lock);
    writeFileSync(lock, intruder);
    const error = await store.takeRange("t").then(
      () => undefined,
      (e: LeafError) => e,
    );
    expect(error).toMatchObject({ code: ErrorCodes.LOCKED });
    expect(error!.message).toContain(`lost its data folder ${dir}`);
    expect(error!.message).toContain(lock);
    expect(failures).toEqual([error]);
    await expect(store.describeTags()).rejects.toMatchObject({ code: ErrorCodes.LOCKED });
    expect(store.stats().lost).toBe(true);
    await store.close();
    expect(readFileSync(lock, "utf8")).toBe(intruder);
  });

  it("refuses a second process of the same host in another PID namespace (unshare --pid): never two holders", async () => {
    const dir = folder();
    const wrapper = ["unshare", "--pid", "--fork", "--kill-child"];
    const first = startTaker(dir, { pauseMs: 5 }, wrapper);
    await first.until((lines) => rangesIn(lines).length >= 20, "the first holder's ranges");
    // Both are pid 1 in their namespaces: the lock's pid must not read as the second's own.
    const second = startTaker(dir, { pauseMs: 5 }, wrapper);
    await second.until((lines) => lines.length > 0, "the second process's first line", 60_000);
    const seen = first.lines.length + second.lines.length;
    await first.until(
      () => first.lines.length + second.lines.length >= seen + 40,
      "more answers of the two",
    );
    await stop(second);
    await stop(first);
    expect(duplicateIds([...rangesIn(first.lines), ...rangesIn(second.lines)])).toBe(0n);
    expect(second.lines).toEqual([
      expect.stringMatching(
        new RegExp(`^error ${ErrorCodes.LOCKED} .*held by pid 1 on host ${hostname()}`),
      ),
    ]);
    expect(second.lines[0]).toContain("another PID namespace");
    expect(errorsIn(first.lines)).toEqual([]);
  });

  it("never hands out a range after a paused holder's folder was taken by another host (SIGSTOP, unshare --uts)", async () => {
    const dir = folder();
    const settings: TakerSettings = { lockStaleAfterMs: 1_500, pauseMs: 5 };
    const holder = startTaker(dir, settings);
    await holder.until((lines) => rangesIn(lines).length >= 30, "the holder's ranges");
    process.kill(holder.child.pid!, "SIGSTOP");
    waitUntilStopped(holder.child.pid!, false, "the holder");
    const otherHost = [
      "unshare",
      "--uts",
      "sh",
      "-c",
      'hostname leaf-other-host && exec "$@"',
      "sh",
    ];
    const taker = startTaker(dir, { ...settings, retryOpenMs: 60_000 }, otherHost);
    await taker.until((lines) => rangesIn(lines).length >= 60, "the other host's ranges", 90_000);
    expect(readLockFile(join(dir, LOCK_FILE))).toMatchObject({ host: "leaf-other-host" });
    const beforeResume = holder.lines.length;
    process.kill(holder.child.pid!, "SIGCONT");
    await holder.until(
      (lines) => lines.length >= beforeResume + 6,
      "the resumed holder's answers (refusals)",
    );
    await stop(holder);
    await stop(taker);
    expect(duplicateIds([...rangesIn(holder.lines), ...rangesIn(taker.lines)])).toBe(0n);
    const resumed = holder.lines.slice(beforeResume);
    expect(rangesIn(resumed)).toEqual([]);
    expect(errorsIn(resumed)[0]).toMatch(
      new RegExp(`^error ${ErrorCodes.LOCKED} .*lost its data folder`),
    );
  });
});
