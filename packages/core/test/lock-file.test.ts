// The exclusive lock file against real processes: a live holder in another process refuses takers,
// a SIGKILLed, reused-pid or zombie holder is taken over, of several processes taking over one stale
// lock exactly one wins, and a holder in another PID namespace (unshare --pid) is never taken over.
import { type ChildProcess, spawn } from "node:child_process";
import {
  existsSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  renameSync,
  rmSync,
  statSync,
  utimesSync,
  writeFileSync,
} from "node:fs";
import { createRequire } from "node:module";
import { hostname, tmpdir } from "node:os";
import { basename, join } from "node:path";
import { createInterface } from "node:readline";
import { pathToFileURL } from "node:url";
import { afterAll, afterEach, describe, expect, it, vi } from "vitest";
import {
  acquireLockFile,
  acquireLockFileWaiting,
  readLockFile,
  tryAcquireLockFile,
} from "../src/adapter";
import { ErrorCodes, isLeafError, type LeafError } from "../src/index";

const root = mkdtempSync(join(tmpdir(), "leaf-core-lock-"));
let files = 0;
const freshLock = () => join(root, `lock-${files++}.lock`);
const children = new Set<ChildProcess>();

afterAll(async () => {
  await Promise.all([...children].map(kill));
  rmSync(root, { recursive: true, force: true });
});

const tsx = pathToFileURL(createRequire(import.meta.url).resolve("tsx")).href;
const lockModule = pathToFileURL(join(import.meta.dirname, "../src/lock-file.ts")).href;

/**
 * A separate process that prints {"ready":true}, waits for a "go" line, tries to take the lock at
 * its first argument, prints {"acquired":...,"pid":...} and holds what it got until killed.
 */
const HOLDER = `
import { createInterface } from "node:readline";
import { tryAcquireLockFile } from ${JSON.stringify(lockModule)};
const [path] = process.argv.slice(1);
const print = (value) => process.stdout.write(JSON.stringify(value) + "\\n");
const input = createInterface({ input: process.stdin });
input.on("line", (line) => {
  if (line !== "go") return;
  const attempt = tryAcquireLockFile(path, { label: "a test holder" });
  print({ acquired: attempt.acquired, pid: process.pid });
});
input.on("close", () => process.exit(0));
print({ ready: true });
`;

interface Holder {
  child: ChildProcess;
  lines: Record<string, unknown>[];
  next(): Promise<Record<string, unknown>>;
}

/**
 * Starts a holder process; `wrapper` runs it under another program, e.g. `unshare --pid --fork` to
 * put it in a PID namespace of its own (where it is pid 1).
 */
function startHolder(path: string, wrapper: string[] = []): Holder {
  const command = [process.execPath, "--import", tsx, "--input-type=module", "-e", HOLDER, path];
  const [program, ...args] = [...wrapper, ...command];
  const child = spawn(program!, args, { stdio: ["pipe", "pipe", "inherit"] });
  children.add(child);
  const lines: Record<string, unknown>[] = [];
  const waiting: ((line: Record<string, unknown>) => void)[] = [];
  let read = 0;
  createInterface({ input: child.stdout! }).on("line", (text) => {
    lines.push(JSON.parse(text) as Record<string, unknown>);
    while (waiting.length > 0 && read < lines.length) waiting.shift()!(lines[read++]!);
  });
  return {
    child,
    lines,
    next: () =>
      new Promise((resolve, reject) => {
        if (read < lines.length) return resolve(lines[read++]!);
        waiting.push(resolve);
        child.once("exit", (code, signal) =>
          reject(
            new Error(`holder exited (${code ?? signal}) after printing ${JSON.stringify(lines)}`),
          ),
        );
      }),
  };
}

/** Starts holders, waits until all are ready, then tells them all to take the lock at once. */
async function race(path: string, count: number, wrapper: string[] = []) {
  const holders = Array.from({ length: count }, () => startHolder(path, wrapper));
  await Promise.all(holders.map((h) => h.next()));
  for (const holder of holders) holder.child.stdin!.write("go\n");
  const outcomes = await Promise.all(holders.map((h) => h.next()));
  return { holders, outcomes: outcomes as { acquired: boolean; pid: number }[] };
}

/** SIGKILL, resolved once the child has exited and been reaped. */
async function kill(child: ChildProcess): Promise<void> {
  children.delete(child);
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once("exit", resolve));
  child.kill("SIGKILL");
  await exited;
}

function thrown(run: () => unknown): LeafError {
  try {
    run();
  } catch (error) {
    if (isLeafError(error)) return error;
    throw error;
  }
  throw new Error("expected a LeafError, but nothing was thrown");
}

const bootId = readFileSync("/proc/sys/kernel/random/boot_id", "utf8").trim();
const pidNamespace = readlinkSync("/proc/self/ns/pid");

/** A lock record as another process (by default of this host, boot and PID namespace) would write it. */
function writeOwner(path: string, owner: Record<string, unknown>): void {
  writeFileSync(
    path,
    JSON.stringify({
      host: hostname(),
      bootId,
      pidNamespace,
      token: "left-behind",
      acquiredAt: 0,
      ...owner,
    }),
  );
}

describe("acquireLockFile within one process", () => {
  it("writes its owner into the lock file and removes the file on release", () => {
    const path = freshLock();
    const lock = acquireLockFile(path, { label: "node 10.0.0.1:8080" });
    expect(readLockFile(path)).toEqual(lock.owner);
    expect(lock.owner).toMatchObject({
      pid: process.pid,
      host: hostname(),
      bootId,
      pidNamespace,
      label: "node 10.0.0.1:8080",
    });
    expect(lock.owns()).toBe(true);
    lock.release();
    lock.release();
    expect(existsSync(path)).toBe(false);
    expect(lock.owns()).toBe(false);
  });

  it("refuses a second holder in the same process with LOCKED naming the holder, until the first releases", () => {
    const path = freshLock();
    const first = acquireLockFile(path, { label: "the first store" });
    const error = thrown(() =>
      acquireLockFile(path, {
        component: "segment",
        resource: "the data folder",
        advice: "stop the other store",
      }),
    );
    expect(error.code).toBe(ErrorCodes.LOCKED);
    expect(error.message).toContain("[segment] the data folder is in use");
    expect(error.message).toContain(`pid ${process.pid} on host ${hostname()} for the first store`);
    expect(error.message).toContain("stop the other store");
    expect(error.details).toMatchObject({ path, owner: { pid: process.pid } });
    const attempt = tryAcquireLockFile(path);
    expect(attempt).toMatchObject({ acquired: false, owner: { token: first.owner.token } });
    const inUse = thrown(() =>
      acquireLockFile(path, { code: ErrorCodes.WORKER_ID_IN_USE, details: { workerId: 5 } }),
    );
    expect(inUse.code).toBe(ErrorCodes.WORKER_ID_IN_USE);
    expect(inUse.details).toMatchObject({ workerId: 5, path });
    first.release();
    const second = acquireLockFile(path);
    expect(second.owns()).toBe(true);
    second.release();
  });

  it("loses the lock when its file is removed and taken by another, and leaves that one alone on release", () => {
    const path = freshLock();
    const lost = acquireLockFile(path);
    rmSync(path);
    const intruder = acquireLockFile(path);
    expect(lost.owns()).toBe(false);
    lost.release();
    expect(readLockFile(path)).toEqual(intruder.owner);
    intruder.release();
  });

  it("takes over a lock naming this process's pid that this process does not hold, as after a restart", () => {
    const path = freshLock();
    writeOwner(path, { pid: process.pid });
    const lock = acquireLockFile(path);
    expect(readLockFile(path)).toMatchObject({ token: lock.owner.token });
    lock.release();
  });

  it("takes over a lock whose process is not running", () => {
    const path = freshLock();
    writeOwner(path, { pid: 2 ** 22 + 12_345 });
    const lock = acquireLockFile(path);
    expect(lock.owns()).toBe(true);
    lock.release();
  });

  it("takes over a lock whose pid was reused by another program, but not one of a live holder", () => {
    const path = freshLock();
    // The parent process runs, but started at another time than the lock says: a reused pid.
    writeOwner(path, { pid: process.ppid, processStart: "1" });
    const lock = acquireLockFile(path);
    lock.release();
    const stat = readFileSync(`/proc/${process.ppid}/stat`, "utf8");
    const realStart = stat.slice(stat.lastIndexOf(")") + 2).split(" ")[19];
    writeOwner(path, { pid: process.ppid, processStart: realStart });
    const error = thrown(() => acquireLockFile(path));
    expect(error.code).toBe(ErrorCodes.LOCKED);
    expect(error.message).toContain(`pid ${process.ppid}`);
  });

  it("refuses an unreadable lock file with LOCKED, saying to delete it if no process uses it", () => {
    const path = freshLock();
    writeFileSync(path, '{"pid": 12');
    const error = thrown(() => acquireLockFile(path, { resource: "worker id 3" }));
    expect(error.code).toBe(ErrorCodes.LOCKED);
    expect(error.message).toContain("worker id 3 is locked");
    expect(error.message).toContain("delete the lock file");
    expect(tryAcquireLockFile(path)).toEqual({
      acquired: false,
      owner: undefined,
      unreadable: true,
    });
    expect(readFileSync(path, "utf8")).toBe('{"pid": 12');
  });

  it("removes temp files a crashed writer left beside the lock, but not fresh ones", () => {
    const path = freshLock();
    const old = `${path}.999.abc.tmp`;
    const fresh = `${path}.998.def.tmp`;
    writeFileSync(old, "{}");
    writeFileSync(fresh, "{}");
    utimesSync(old, new Date(Date.now() - 120_000), new Date(Date.now() - 120_000));
    const lock = acquireLockFile(path);
    expect(existsSync(old)).toBe(false);
    expect(existsSync(fresh)).toBe(true);
    lock.release();
  });

  it("rejects a bad path or foreignStaleAfterMs with INVALID_ARGUMENT naming it", () => {
    for (const [path, options, name] of [
      ["", {}, "path"],
      [freshLock(), { foreignStaleAfterMs: 0 }, "foreignStaleAfterMs"],
      [freshLock(), { foreignStaleAfterMs: 1.5 }, "foreignStaleAfterMs"],
    ] as const) {
      const error = thrown(() => acquireLockFile(path, options));
      expect(error.code).toBe(ErrorCodes.INVALID_ARGUMENT);
      expect(error.details.name).toBe(name);
    }
  });
});

describe("acquireLockFile and owners it cannot judge by pid", () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it("never takes over a lock of a pid that looks dead when it was written in another PID namespace, boot or version", () => {
    const gone = 2 ** 22 + 12_345;
    const cases: [Record<string, unknown>, string][] = [
      [{ pid: gone, pidNamespace: "pid:[4026599999]" }, "another PID namespace"],
      // pid 1 of another container is this process's pid 1 here, without being this process.
      [{ pid: process.pid, pidNamespace: "pid:[4026599999]" }, "another PID namespace"],
      [{ pid: gone, bootId: "00000000-0000-0000-0000-000000000000" }, "another boot"],
      [{ pid: gone, bootId: undefined, pidNamespace: undefined }, "records no boot id"],
    ];
    for (const [owner, why] of cases) {
      const path = freshLock();
      // A holder that heartbeats records how long it may go untouched.
      writeOwner(path, { ...owner, staleAfterMs: 30_000 });
      const longAgo = new Date(Date.now() - 3_600_000);
      utimesSync(path, longAgo, longAgo);
      const error = thrown(() => acquireLockFile(path));
      expect(error.code).toBe(ErrorCodes.LOCKED);
      expect(error.message).toContain(why);
      expect(error.message).toContain("never taken over");
      expect(readLockFile(path)).toMatchObject({ token: "left-behind" });
      // Only an explicit staleness rule takes it, and only once the file went untouched that long.
      const recent = new Date(Date.now() - 5_000);
      utimesSync(path, recent, recent);
      expect(() => acquireLockFile(path, { foreignStaleAfterMs: 30_000 })).toThrow(
        expect.objectContaining({ code: ErrorCodes.LOCKED }),
      );
      utimesSync(path, longAgo, longAgo);
      const lock = acquireLockFile(path, { foreignStaleAfterMs: 30_000 });
      expect(lock.owns()).toBe(true);
      lock.release();
    }
  });

  it("never takes over by age a lock whose holder records no staleAfterMs (it does not heartbeat), and waits the longer of the two settings", () => {
    const path = freshLock();
    writeOwner(path, { pid: 1, pidNamespace: "pid:[4026599999]" });
    const longAgo = new Date(Date.now() - 3_600_000);
    utimesSync(path, longAgo, longAgo);
    const error = thrown(() => acquireLockFile(path, { foreignStaleAfterMs: 1_000 }));
    expect(error.code).toBe(ErrorCodes.LOCKED);
    expect(error.message).toContain("does not heartbeat the lock");
    expect(tryAcquireLockFile(path, { foreignStaleAfterMs: 1_000 })).not.toHaveProperty("staleAt");
    // The holder's longer setting wins over the taker's shorter one.
    writeOwner(path, { pid: 1, pidNamespace: "pid:[4026599999]", staleAfterMs: 60_000 });
    const recent = new Date(Date.now() - 5_000);
    utimesSync(path, recent, recent);
    expect(tryAcquireLockFile(path, { foreignStaleAfterMs: 1_000 })).toMatchObject({
      acquired: false,
      staleAt: statSync(path).mtimeMs + 60_000,
    });
    utimesSync(path, longAgo, longAgo);
    const lock = acquireLockFile(path, { foreignStaleAfterMs: 1_000 });
    expect(readLockFile(path)).toMatchObject({ pid: process.pid, staleAfterMs: 1_000 });
    lock.release();
  });

  it("no longer owns a lock whose file was replaced by a copy with the same content", () => {
    const path = freshLock();
    const lock = acquireLockFile(path);
    // Written beside it while the original still exists, so that it gets another inode.
    writeFileSync(`${path}.copy`, readFileSync(path, "utf8"));
    renameSync(`${path}.copy`, path);
    expect(lock.owns()).toBe(false);
    lock.release();
  });

  it("never takes over a lock written on another host unless told how long one may go untouched", () => {
    const path = freshLock();
    writeOwner(path, { pid: 1, host: "elsewhere.example", staleAfterMs: 30_000 });
    const longAgo = new Date(Date.now() - 3_600_000);
    utimesSync(path, longAgo, longAgo);
    const error = thrown(() => acquireLockFile(path));
    expect(error.message).toContain("on host elsewhere.example");
    expect(error.message).toContain("never taken over");
    // Touched recently: still live for a taker that judges by age.
    const recent = new Date(Date.now() - 5_000);
    utimesSync(path, recent, recent);
    expect(() => acquireLockFile(path, { foreignStaleAfterMs: 30_000 })).toThrow(
      expect.objectContaining({ code: ErrorCodes.LOCKED }),
    );
    utimesSync(path, longAgo, longAgo);
    const lock = acquireLockFile(path, { foreignStaleAfterMs: 30_000 });
    expect(lock.owns()).toBe(true);
    lock.release();
  });

  it("keeps its own lock fresh for other hosts while held, and stops on release", () => {
    vi.useFakeTimers();
    const path = freshLock();
    const lock = acquireLockFile(path, { foreignStaleAfterMs: 3_000 });
    const longAgo = new Date(Date.now() - 3_600_000);
    utimesSync(path, longAgo, longAgo);
    vi.advanceTimersByTime(1_000);
    expect(statSync(path).mtimeMs).toBeGreaterThan(longAgo.getTime() + 3_000_000);
    lock.release();
    expect(vi.getTimerCount()).toBe(0);
  });
});

describe("heartbeat, fenceAt and waiting for a lock that cannot be judged", () => {
  /** Polls `check` every 20 ms until it holds (no fixed sleeps: the machine may be slow). */
  async function until(check: () => boolean, what: string): Promise<void> {
    const deadline = Date.now() + 30_000;
    while (!check()) {
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }

  /** A lock of pid 1 of another PID namespace (another container), last touched `ageMs` ago. */
  function foreignLock(ageMs: number): { path: string; touchedAt: number } {
    const path = freshLock();
    writeOwner(path, { pid: 1, pidNamespace: "pid:[4026599999]", staleAfterMs: 100 });
    const at = new Date(Date.now() - ageMs);
    utimesSync(path, at, at);
    return { path, touchedAt: statSync(path).mtimeMs };
  }

  it("has no fenceAt and no heartbeat without foreignStaleAfterMs", () => {
    const lock = acquireLockFile(freshLock());
    expect(lock.fenceAt).toBeUndefined();
    expect(lock.horizon).toBeUndefined();
    lock.release();
  });

  it("publishes as horizon the mtime its last heartbeat wrote + half of foreignStaleAfterMs", async () => {
    const path = freshLock();
    const lock = acquireLockFile(path, { foreignStaleAfterMs: 400, component: "test" });
    // The heartbeat writes a whole ms as a Date; Node passes it to the kernel as float seconds, so
    // the stored mtime can read up to 1 µs below that ms (about half of all ms values): rounded back.
    const wroteMs = () => Math.round(statSync(path).mtimeMs);
    expect(lock.horizon).toBe(wroteMs() + 200);
    const first = lock.horizon!;
    await until(() => lock.horizon! > first, "a heartbeat");
    expect(lock.horizon).toBe(wroteMs() + 200);
    lock.release();
  });

  it("moves fenceAt on with each heartbeat (half of foreignStaleAfterMs after its start), and aborts lost once the file is replaced", async () => {
    const path = freshLock();
    const before = performance.now();
    const lock = acquireLockFile(path, { foreignStaleAfterMs: 400, component: "test" });
    const first = lock.fenceAt!;
    expect(first).toBeGreaterThanOrEqual(before + 200);
    expect(first).toBeLessThanOrEqual(performance.now() + 200);
    const created = statSync(path).mtimeMs;
    await until(() => lock.fenceAt! > first, "a heartbeat");
    expect(statSync(path).mtimeMs).toBeGreaterThan(created);
    expect(lock.lost.aborted).toBe(false);
    // Taken over while this holder looked away: the next heartbeat finds it and stops.
    writeFileSync(`${path}.copy`, readFileSync(path, "utf8"));
    renameSync(`${path}.copy`, path);
    await until(() => lock.lost.aborted, "the lost signal");
    expect(lock.lost.reason).toMatchObject({ code: ErrorCodes.LOCKED, component: "test" });
    expect((lock.lost.reason as LeafError).message).toContain("taken over by another process");
    const fenced = lock.fenceAt;
    const mtime = statSync(path).mtimeMs;
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(lock.fenceAt).toBe(fenced);
    // The replacing file is not touched by the old holder.
    expect(statSync(path).mtimeMs).toBe(mtime);
    lock.release();
    expect(existsSync(path)).toBe(true);
  });

  it("reports when a lock it cannot judge may be taken over (staleAt: its mtime + foreignStaleAfterMs)", () => {
    const { path, touchedAt } = foreignLock(1_000);
    const attempt = tryAcquireLockFile(path, { foreignStaleAfterMs: 60_000 });
    expect(attempt).toMatchObject({ acquired: false, staleAt: touchedAt + 60_000 });
    // Without a staleness rule, or for a live owner, there is no such instant.
    expect(tryAcquireLockFile(path)).not.toHaveProperty("staleAt");
    const live = acquireLockFile(freshLock());
    const refused = tryAcquireLockFile(live.path, { foreignStaleAfterMs: 60_000 });
    expect(refused).toMatchObject({ acquired: false });
    expect(refused).not.toHaveProperty("staleAt");
    live.release();
  });

  it("waits for a lock it cannot judge to go untouched for foreignStaleAfterMs, then takes it over, not before", async () => {
    const { path, touchedAt } = foreignLock(0);
    const lock = await acquireLockFileWaiting(path, { foreignStaleAfterMs: 800 });
    expect(Date.now()).toBeGreaterThanOrEqual(touchedAt + 800);
    expect(lock.owns()).toBe(true);
    expect(readLockFile(path)).toMatchObject({ pid: process.pid });
    // Nothing of the takeover is left beside it.
    const left = readdirSync(root).filter((name) => name.startsWith(`${basename(path)}.`));
    expect(left).toEqual([]);
    lock.release();
  });

  it("refuses once the lock is touched while it waits (its holder is alive), and at once for a live holder", async () => {
    const { path } = foreignLock(0);
    const touching = setInterval(() => {
      const now = new Date();
      utimesSync(path, now, now);
    }, 100);
    try {
      const error = (await acquireLockFileWaiting(path, {
        foreignStaleAfterMs: 600,
        code: ErrorCodes.WORKER_ID_IN_USE,
      }).catch((e: unknown) => e)) as LeafError;
      expect(error).toMatchObject({ code: ErrorCodes.WORKER_ID_IN_USE });
      expect(error.message).toContain("touched or changed hands while this process waited");
      expect(readLockFile(path)).toMatchObject({ token: "left-behind" });
    } finally {
      clearInterval(touching);
    }
    const live = acquireLockFile(freshLock());
    const started = Date.now();
    await expect(
      acquireLockFileWaiting(live.path, { foreignStaleAfterMs: 60_000 }),
    ).rejects.toMatchObject({ code: ErrorCodes.LOCKED });
    expect(Date.now() - started).toBeLessThan(60_000);
    live.release();
  });

  it("stops waiting when its signal aborts", async () => {
    const { path } = foreignLock(0);
    const controller = new AbortController();
    const waiting = acquireLockFileWaiting(path, {
      foreignStaleAfterMs: 60_000,
      signal: controller.signal,
    });
    controller.abort(new Error("shutting down"));
    await expect(waiting).rejects.toThrow("shutting down");
    expect(readLockFile(path)).toMatchObject({ token: "left-behind" });
  });
});

describe("acquireLockFile between processes", () => {
  it("refuses while another live process holds the lock, and takes it over once that one is SIGKILLed", async () => {
    const path = freshLock();
    const {
      holders: [holder],
      outcomes: [outcome],
    } = await race(path, 1);
    expect(outcome!.acquired).toBe(true);
    const error = thrown(() => acquireLockFile(path));
    expect(error.code).toBe(ErrorCodes.LOCKED);
    expect(error.message).toContain(
      `pid ${holder!.child.pid} on host ${hostname()} for a test holder`,
    );
    await kill(holder!.child);
    const lock = acquireLockFile(path);
    expect(readLockFile(path)).toMatchObject({ pid: process.pid, token: lock.owner.token });
    lock.release();
  });

  it("lets exactly one of four processes take over a lock left by a dead process", async () => {
    const path = freshLock();
    const dead = await race(path, 1);
    expect(dead.outcomes[0]!.acquired).toBe(true);
    await kill(dead.holders[0]!.child);
    const { holders, outcomes } = await race(path, 4);
    const winners = outcomes.filter((o) => o.acquired);
    expect(winners).toHaveLength(1);
    expect(readLockFile(path)).toMatchObject({ pid: winners[0]!.pid });
    await Promise.all(holders.map((h) => kill(h.child)));
    // No claim file of the takeover is left behind.
    expect(readdirSync(root).filter((name) => name.includes(".claim"))).toEqual([]);
  });

  it("refuses a holder of the same host in another PID namespace (unshare --pid), though both are pid 1", async () => {
    const path = freshLock();
    const wrapper = ["unshare", "--pid", "--fork", "--kill-child"];
    const first = await race(path, 1, wrapper);
    expect(first.outcomes[0]).toEqual({ acquired: true, pid: 1 });
    const owner = readLockFile(path);
    // Other namespaces: their own pid is 1 as well, which must not read as "my own stale lock".
    const second = await race(path, 3, wrapper);
    expect(second.outcomes).toEqual([
      { acquired: false, pid: 1 },
      { acquired: false, pid: 1 },
      { acquired: false, pid: 1 },
    ]);
    expect(owner).toMatchObject({ pid: 1, host: hostname(), bootId });
    expect((owner as { pidNamespace: string }).pidNamespace).not.toBe(pidNamespace);
    // This namespace sees another process as pid 1: not proof of anything either.
    const error = thrown(() => acquireLockFile(path));
    expect(error.code).toBe(ErrorCodes.LOCKED);
    expect(error.message).toContain("another PID namespace");
    expect(readLockFile(path)).toEqual(owner);
    await Promise.all([...first.holders, ...second.holders].map((h) => kill(h.child)));
  });

  it("takes over a lock whose process exited but was not reaped yet (a zombie)", async () => {
    const path = freshLock();
    // The background sleep exits once its parent shell has become another sleep (exec), which
    // never reaps it. (Exiting at once, it could be reaped by the shell before the exec.)
    const parent = spawn("sh", ["-c", "sleep 0.3 & echo $!; exec sleep 60"], {
      stdio: ["ignore", "pipe", "inherit"],
    });
    children.add(parent);
    const [line] = await new Promise<string[]>((resolve) =>
      createInterface({ input: parent.stdout! }).once("line", (l) => resolve([l])),
    );
    const pid = Number(line);
    let state = "";
    for (let i = 0; i < 100 && state !== "Z"; i++) {
      const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
      state = stat.slice(stat.lastIndexOf(")") + 2).split(" ")[0]!;
      if (state !== "Z") await new Promise((resolve) => setTimeout(resolve, 50));
    }
    expect(state).toBe("Z");
    writeOwner(path, { pid });
    const lock = acquireLockFile(path);
    expect(lock.owns()).toBe(true);
    lock.release();
    await kill(parent);
  });
});
