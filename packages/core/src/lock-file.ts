// An exclusive lock file that survives crashes: created atomically with its owner inside (pid, host,
// boot id, PID namespace, process start time, a random token), and taken over only when that owner is
// provably gone, through a claim file so that two processes taking over the same stale lock never
// both win. With a staleness rule, a holder heartbeats its lock and publishes a fence deadline, so
// that a lock whose owner cannot be judged (another container, another boot) is taken over safely
// once it goes untouched.
import { randomBytes } from "node:crypto";
import {
  closeSync,
  fstatSync,
  fsyncSync,
  futimesSync,
  linkSync,
  openSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  renameSync,
  statSync,
  unlinkSync,
  utimesSync,
  writeFileSync,
} from "node:fs";
import { hostname } from "node:os";
import { basename, dirname, join } from "node:path";
import { delay } from "./backoff";
import { systemClock } from "./clock";
import { argumentError, type ErrorCode, ErrorCodes, LeafError } from "./errors";
import { readTextIfExists } from "./lease-cache";

/** Who holds a lock file: the JSON object the file holds. */
export interface LockFileOwner {
  /** The holder's process id. */
  pid: number;
  /** The holder's host name (`os.hostname()`); a pid is only judged on the host that wrote it. */
  host: string;
  /**
   * The kernel's boot id (`/proc/sys/kernel/random/boot_id`, Linux): a pid is only judged by a process
   * of the same boot of the same kernel. Missing in records of older versions and off Linux.
   */
  bootId?: string;
  /**
   * The holder's PID namespace (`readlink /proc/self/ns/pid`, e.g. "pid:[4026531836]", Linux): a pid
   * means nothing in another namespace (containers, `unshare --pid`), so it is only judged by a
   * process of the same namespace. Missing in records of older versions and off Linux.
   */
  pidNamespace?: string;
  /** The process's start time as the kernel counts it (Linux), to tell a reused pid apart. */
  processStart: string | undefined;
  /** Random per lock: says which holding this is, even within one process. */
  token: string;
  /** What the holder uses the lock for, in words (e.g. a node "10.0.0.9:8080"), for messages. */
  label?: string;
  /**
   * The holder's `foreignStaleAfterMs`: it touches the lock every quarter of this and stops acting
   * under it half of this after its last touch (`fenceAt`). Only a lock that records it is ever
   * taken over by age, and only once untouched for the longer of this and the taker's own setting.
   * Missing when the holder does not heartbeat (no `foreignStaleAfterMs`, or an older version).
   */
  staleAfterMs?: number;
  /** When the lock was taken, ms since the Unix epoch. */
  acquiredAt: number;
}

/** Options of {@link acquireLockFile} and {@link tryAcquireLockFile}. */
export interface LockFileOptions {
  /** The component named in errors ("segment", "registry-local"). Default "core". */
  component?: string;
  /** Stored in the owner record, shown to a refused taker (e.g. the node "10.0.0.9:8080"). */
  label?: string;
  /** What the lock guards, for the LOCKED message (e.g. "the data folder /var/leaf"). */
  resource?: string;
  /** What a refused taker should do, for the LOCKED message (e.g. "stop the other process"). */
  advice?: string;
  /** The code of the refusal (default LOCKED; a worker-id registry says WORKER_ID_IN_USE). */
  code?: ErrorCode;
  /** Added to the refusal's details (which hold `path`, `owner` and `unreadable`). */
  details?: Record<string, unknown>;
  /**
   * A lock whose owner cannot be judged by its pid (written on another host, in another boot, in
   * another PID namespace such as another container, or by a version that did not record these) is
   * never taken over by default: its owner cannot be proven dead. Given this many ms, it is taken
   * over once its file has not been touched for that long (judged by its mtime against the taker's
   * clock). The holder heartbeats its lock every quarter of it: it checks that the file is still its
   * own, touches it, and checks again; `fenceAt` is the start of the last such heartbeat plus half of
   * it, and `lost` aborts once a heartbeat finds the file gone or replaced. A holder that is merely
   * paused (SIGSTOP, a VM freeze) for that long loses its lock this way: only use it when the holder
   * stops acting under the lock at `fenceAt` or checks `owns()` before and after every write it
   * makes under the lock, as the embedded segment store does. Processes sharing the folder need
   * clocks within a small part of this of each other (the same machine's clock, or NTP).
   */
  foreignStaleAfterMs?: number;
}

/** Options of {@link acquireLockFileWaiting}. */
export interface LockFileWaitOptions extends LockFileOptions {
  /** Aborts the wait (rejecting with the signal's reason). */
  signal?: AbortSignal;
}

/** A lock file this process holds. */
export interface HeldLockFile {
  /** The lock file. */
  readonly path: string;
  /** The owner record written into it. */
  readonly owner: LockFileOwner;
  /**
   * True while the lock file at `path` is still the one this holder created (same inode, same
   * content): false once it was removed, replaced or taken over. Reads the file each time.
   */
  owns(): boolean;
  /**
   * With `foreignStaleAfterMs`: the `performance.now()` instant (ms) after which this holder must not
   * act under the lock unless a later heartbeat moves it: the start of the last heartbeat that found
   * the file its own, touched it and found it its own again, plus half of `foreignStaleAfterMs`.
   * Another process takes the lock over only once it went untouched for all of
   * `foreignStaleAfterMs`, so a holder that stops at `fenceAt` has stopped before then, even when it
   * was paused. Undefined without `foreignStaleAfterMs` (the lock is then never taken over from a
   * live or unjudgeable holder).
   */
  readonly fenceAt: number | undefined;
  /**
   * Aborted once this holder finds the file is no longer its own (a heartbeat or `owns()` saw it
   * removed, replaced or taken over); the reason is a LeafError (LOCKED, or `options.code`).
   */
  readonly lost: AbortSignal;
  /** Stops touching the lock and removes it if it is still the one this holder created. Idempotent. */
  release(): void;
}

/** What {@link tryAcquireLockFile} found. */
export type LockFileAttempt =
  | { acquired: true; lock: HeldLockFile }
  | {
      acquired: false;
      /** The live holder; undefined when the file is unreadable or racers kept replacing it. */
      owner: LockFileOwner | undefined;
      /** True when the lock file exists but holds no owner record (damaged, or not a lock). */
      unreadable: boolean;
      /**
       * Set when the owner cannot be judged by its pid and `foreignStaleAfterMs` is given: the instant
       * (ms since the Unix epoch) from which the lock may be taken over if nobody touches it before.
       */
      staleAt?: number;
    };

/** Tokens of the locks this process holds, shared by every copy of this module it loaded. */
const held: Set<string> = sharedHeldSet();

function sharedHeldSet(): Set<string> {
  const key = Symbol.for("@leaf/core.heldLockFiles");
  const global = globalThis as Record<symbol, unknown>;
  if (!(global[key] instanceof Set)) global[key] = new Set<string>();
  return global[key] as Set<string>;
}

/** How many nested claims a takeover may need (each level only after a crash mid-takeover). */
const MAX_CLAIM_DEPTH = 3;
/** How often a lock that keeps changing hands is read again before giving up. */
const MAX_ATTEMPTS = 8;
/** Leftover temp files of a crashed writer older than this are removed (ms). */
const TEMP_MAX_AGE_MS = 60_000;
/** How often {@link acquireLockFileWaiting} waits for an untouched lock before giving up. */
const MAX_WAITS = 8;

/**
 * Takes the lock file at `path` (its folder must exist), or reports who holds it. A lock whose
 * owner is provably gone is taken over. Proof needs the same host, the same boot id and the same
 * PID namespace as this process (so that its pid means the same process here), and then its pid is
 * not running, is a zombie, runs a program started at another time than the one that locked (a
 * reused pid, Linux), or is this very process without holding it. Any other owner (another host,
 * boot or PID namespace) cannot be proven gone and is only taken over with `foreignStaleAfterMs`.
 * The file is created by hard-linking a fully written temp file, so it is never seen empty or half
 * written; the folder needs a file system with hard links. Throws
 * INVALID_ARGUMENT for bad options, and the file system's error when the folder cannot be used.
 */
export function tryAcquireLockFile(path: string, options: LockFileOptions = {}): LockFileAttempt {
  const settings = checkOptions(path, options);
  const owner = newOwner(options.label, settings.foreignStaleAfterMs);
  const attempt = lockAs(path, owner, settings.foreignStaleAfterMs, 0);
  if (!attempt.acquired) return attempt;
  return {
    acquired: true,
    lock: holdLock(path, owner, attempt.created, settings.foreignStaleAfterMs, options),
  };
}

/**
 * Takes the lock file at `path` like {@link acquireLockFile}, but when its owner cannot be judged by
 * pid and `foreignStaleAfterMs` is given, waits (at most about `foreignStaleAfterMs`) for the lock
 * to go untouched that long and then takes it over: a process restarted in a new container or after
 * a reboot gets its lock back by itself. Rejects with LOCKED (or `options.code`) at once when the
 * owner is alive (same PID namespace) or the file holds no owner record, and as soon as the lock is
 * touched or changes hands while waiting (its holder is alive); with the signal's reason on abort.
 */
export async function acquireLockFileWaiting(
  path: string,
  options: LockFileWaitOptions = {},
): Promise<HeldLockFile> {
  const { signal, ...lockOptions } = options;
  let seen: { token: string; staleAt: number } | undefined;
  for (let wait = 0; ; wait++) {
    signal?.throwIfAborted();
    const attempt = tryAcquireLockFile(path, lockOptions);
    if (attempt.acquired) return attempt.lock;
    const { owner, staleAt } = attempt;
    const touched =
      seen !== undefined && (owner?.token !== seen.token || (staleAt ?? 0) > seen.staleAt);
    if (owner === undefined || staleAt === undefined || touched || wait >= MAX_WAITS) {
      const note = touched
        ? `; the lock was touched or changed hands while this process waited for it to go stale, so its holder is alive`
        : undefined;
      throw lockedError(path, lockOptions, owner, attempt.unreadable, note);
    }
    seen = { token: owner.token, staleAt };
    // Past staleAt but not taken: another taker held the claim; look again shortly. A lock touched
    // in the future (a clock set back) is looked at again at least every staleAfterMs.
    const cap = staleAfterFor(owner, lockOptions.foreignStaleAfterMs) ?? 0;
    const ms = Math.min(Math.max(staleAt - Date.now(), 0), cap);
    await delay(ms + 10, signal);
  }
}

/**
 * Takes the lock file at `path` like {@link tryAcquireLockFile}, or throws LOCKED (or
 * `options.code`) naming the holder (pid, host, since when) and what to do.
 */
export function acquireLockFile(path: string, options: LockFileOptions = {}): HeldLockFile {
  const attempt = tryAcquireLockFile(path, options);
  if (attempt.acquired) return attempt.lock;
  throw lockedError(path, options, attempt.owner, attempt.unreadable);
}

/**
 * Reads the owner of a lock file: undefined when there is none, "unreadable" when the file holds no
 * owner record. Throws the file system's error when it cannot be read.
 */
export function readLockFile(path: string): LockFileOwner | "unreadable" | undefined {
  const text = readTextIfExists(path);
  if (text === undefined) return undefined;
  try {
    const value = JSON.parse(text) as Partial<LockFileOwner>;
    if (
      typeof value === "object" &&
      value !== null &&
      Number.isInteger(value.pid) &&
      typeof value.host === "string" &&
      typeof value.token === "string"
    ) {
      return value as LockFileOwner;
    }
  } catch {
    // Not JSON: unreadable.
  }
  return "unreadable";
}

function checkOptions(path: string, options: LockFileOptions): { foreignStaleAfterMs?: number } {
  const component = options?.component ?? "core";
  if (typeof path !== "string" || path === "") {
    throw argumentError(component, "path", path, "the path of a lock file");
  }
  const staleAfter = options.foreignStaleAfterMs;
  if (staleAfter !== undefined && (!Number.isSafeInteger(staleAfter) || staleAfter < 1)) {
    throw argumentError(component, "foreignStaleAfterMs", staleAfter, "a positive integer of ms");
  }
  return { foreignStaleAfterMs: staleAfter };
}

function newOwner(label: string | undefined, staleAfterMs: number | undefined): LockFileOwner {
  const here = thisProcess();
  return {
    pid: process.pid,
    host: hostname(),
    ...(here.bootId === undefined ? {} : { bootId: here.bootId }),
    ...(here.pidNamespace === undefined ? {} : { pidNamespace: here.pidNamespace }),
    // /proc/self, not /proc/<pid>: under `unshare --pid` without its own /proc the two differ.
    processStart: procStat("self")?.start,
    token: randomToken(),
    ...(label === undefined ? {} : { label }),
    ...(staleAfterMs === undefined ? {} : { staleAfterMs }),
    acquiredAt: Date.now(),
  };
}

/** What identifies this process's view of pids: boot, PID namespace, and whether /proc matches it. */
interface ProcessView {
  bootId: string | undefined;
  pidNamespace: string | undefined;
  /** True when /proc/<pid> shows this namespace's pids (its /proc/self is our pid). */
  procMatches: boolean;
}

let view: ProcessView | undefined;

function thisProcess(): ProcessView {
  if (view) return view;
  let bootId: string | undefined;
  let pidNamespace: string | undefined;
  let procMatches = false;
  try {
    bootId = readFileSync("/proc/sys/kernel/random/boot_id", "utf8").trim() || undefined;
  } catch {
    // Not Linux: no boot id, so no pid can be judged across processes (see isStale).
  }
  try {
    pidNamespace = readlinkSync("/proc/self/ns/pid");
  } catch {
    // Not Linux, or /proc is not mounted.
  }
  try {
    procMatches = Number(readFileSync("/proc/self/stat", "utf8").split(" ")[0]) === process.pid;
  } catch {
    // No /proc.
  }
  view = { bootId, pidNamespace, procMatches };
  return view;
}

/** What a lock file created by this process holds, to tell it apart from any later one. */
interface Created {
  text: string;
  dev: number;
  ino: number;
  /** performance.now() read before the file's mtime was set: the start of its first "heartbeat". */
  since: number;
}

type Attempt = { acquired: true; created: Created } | Extract<LockFileAttempt, { acquired: false }>;

function lockAs(
  path: string,
  owner: LockFileOwner,
  foreignStaleAfterMs: number | undefined,
  depth: number,
): Attempt {
  sweepTempFiles(path);
  for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
    const created = createExclusive(path, owner);
    if (created) {
      held.add(owner.token);
      return { acquired: true, created };
    }
    const current = readLockFile(path);
    if (current === undefined) continue; // released in between: try again
    if (current === "unreadable") return { acquired: false, owner: undefined, unreadable: true };
    if (!isStale(path, current, foreignStaleAfterMs) || depth >= MAX_CLAIM_DEPTH) {
      return refusal(path, current, foreignStaleAfterMs);
    }
    // Only the process holding the claim for this stale token may remove the lock that names it.
    const claimPath = `${path}.${current.token}.claim`;
    const claimOwner = { ...owner, token: randomToken() };
    // A claim lives for a few ms: one from another host that is old enough is surely stale.
    const claim = lockAs(claimPath, claimOwner, foreignStaleAfterMs, depth + 1);
    if (!claim.acquired)
      return { acquired: false, owner: claim.owner ?? current, unreadable: false };
    try {
      let waitMs = 0;
      const again = readLockFile(path);
      if (typeof again === "object" && again.token === current.token) {
        // Judged again now that the claim is ours: its holder may have touched it meanwhile.
        if (!isStale(path, again, foreignStaleAfterMs)) {
          return refusal(path, again, foreignStaleAfterMs);
        }
        const removed = removeStale(path, again.token, claimOwner.token);
        if (removed === "changed") continue;
        const staleAfter = staleAfterFor(again, foreignStaleAfterMs);
        if (removed !== "gone" && staleAfter !== undefined && judgeOwner(again) !== "dead") {
          // A holder that cannot be judged touched it between our look and its removal: its last
          // heartbeat's fenceAt may still be ahead, so this lock is only used once that has passed.
          waitMs = Math.min(staleAfter - (Date.now() - removed), staleAfter);
        }
      }
      const created = createExclusive(path, owner);
      if (created) {
        held.add(owner.token);
        if (waitMs > 0) {
          systemClock.sleepSync(waitMs);
          created.since = touch(path);
        }
        return { acquired: true, created };
      }
      // Another process created the lock between our removal and create: judge that owner next.
    } finally {
      release(claimPath, claimOwner.token);
    }
  }
  const last = readLockFile(path);
  return { acquired: false, owner: typeof last === "object" ? last : undefined, unreadable: false };
}

/** The refusal of a lock held by `owner`, with `staleAt` when only its age can free it. */
function refusal(
  path: string,
  owner: LockFileOwner,
  foreignStaleAfterMs: number | undefined,
): Attempt {
  const verdict = judgeOwner(owner);
  const staleAfter = staleAfterFor(owner, foreignStaleAfterMs);
  if (staleAfter === undefined || verdict === "dead" || verdict === "alive") {
    return { acquired: false, owner, unreadable: false };
  }
  let touchedAt: number;
  try {
    touchedAt = statSync(path).mtimeMs;
  } catch {
    touchedAt = Date.now(); // released in between: whoever locks next is judged afresh
  }
  return { acquired: false, owner, unreadable: false, staleAt: touchedAt + staleAfter };
}

/**
 * Moves the stale lock naming `token` out of the way (a rename, so that what was removed can be
 * checked afterwards) and deletes it. Returns the removed file's mtime (ms), "gone" when there was
 * no file, or "changed" when the file at `path` had become another lock in between (its holder
 * released and another process locked): that one is put back.
 */
function removeStale(path: string, token: string, claimToken: string): number | "gone" | "changed" {
  const grave = `${path}.${claimToken}.stale.tmp`;
  try {
    renameSync(path, grave);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return "gone";
    throw error;
  }
  try {
    const moved = readLockFile(grave);
    if (typeof moved !== "object" || moved.token !== token) {
      try {
        linkSync(grave, path);
      } catch (error) {
        // EEXIST: a third process locked in between; that one is judged next.
        if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
      }
      return "changed";
    }
    // Every touch of a heartbeat that then found the file its own came before the rename.
    return statSync(grave).mtimeMs;
  } finally {
    unlinkQuietly(grave);
  }
}

/** Sets the file's mtime to now; returns the performance.now() read before. */
function touch(path: string): number {
  const since = performance.now();
  const now = new Date();
  utimesSync(path, now, now);
  return since;
}

function holdLock(
  path: string,
  owner: LockFileOwner,
  created: Created,
  foreignStaleAfterMs: number | undefined,
  options: LockFileOptions,
): HeldLockFile {
  const controller = new AbortController();
  let timer: NodeJS.Timeout | undefined;
  const isMine = () => {
    try {
      const stat = statSync(path);
      return (
        stat.ino === created.ino &&
        stat.dev === created.dev &&
        readFileSync(path, "utf8") === created.text
      );
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw error;
      return false;
    }
  };
  const owns = () => {
    const mine = isMine();
    if (!mine && !controller.signal.aborted) {
      clearInterval(timer);
      controller.abort(lostError(path, options));
    }
    return mine;
  };
  let lastBeat = created.since;
  if (foreignStaleAfterMs !== undefined) {
    // Keeps the lock fresh for processes that judge it by its age alone, and moves fenceAt on.
    timer = setInterval(
      () => {
        try {
          if (!owns()) return;
          const since = touch(path);
          // Touched a file that was taken over right before the touch: not a heartbeat of ours.
          if (owns()) lastBeat = since;
        } catch {
          // The folder went away or became read-only: fenceAt is not moved, so the holder stops.
        }
      },
      Math.max(1, Math.floor(foreignStaleAfterMs / 4)),
    );
    timer.unref();
  }
  let released = false;
  return {
    path,
    owner,
    owns,
    get fenceAt() {
      return foreignStaleAfterMs === undefined ? undefined : lastBeat + foreignStaleAfterMs / 2;
    },
    lost: controller.signal,
    release() {
      if (released) return;
      released = true;
      clearInterval(timer);
      try {
        // By inode and content, not token alone: a copy of it put in its place is not removed.
        if (isMine()) unlinkQuietly(path);
      } finally {
        held.delete(owner.token);
      }
    },
  };
}

function lostError(path: string, options: LockFileOptions): LeafError {
  const resource = options.resource ?? `lock file ${path}`;
  return new LeafError({
    component: options.component ?? "core",
    code: options.code ?? ErrorCodes.LOCKED,
    message:
      `${resource} is no longer held by this process: lock file ${path} was removed, replaced or ` +
      "taken over by another process (after going untouched, e.g. while this process was paused); " +
      "stop using it",
    details: { ...options.details, path },
  });
}

/** Removes the lock file at `path` if it still names `token`, and forgets the token. */
function release(path: string, token: string): void {
  try {
    if (readOwnerToken(path) === token) unlinkQuietly(path);
  } finally {
    held.delete(token);
  }
}

function randomToken(): string {
  return randomBytes(12).toString("hex");
}

function readOwnerToken(path: string): string | undefined {
  const owner = readLockFile(path);
  return typeof owner === "object" ? owner.token : undefined;
}

/** Whether the owner of a lock may be replaced: provably gone, or unjudgeable and untouched long. */
function isStale(
  path: string,
  owner: LockFileOwner,
  foreignStaleAfterMs: number | undefined,
): boolean {
  const verdict = judgeOwner(owner);
  if (verdict === "dead") return true;
  if (verdict === "alive") return false;
  const staleAfter = staleAfterFor(owner, foreignStaleAfterMs);
  return staleAfter !== undefined && ageMs(path) >= staleAfter;
}

/**
 * How long a lock of `owner` that cannot be judged by pid must go untouched before it is taken over:
 * the longer of the taker's and the holder's setting; undefined (never) when either has none, since
 * a holder that does not record one does not heartbeat and fence as this needs.
 */
function staleAfterFor(
  owner: LockFileOwner,
  foreignStaleAfterMs: number | undefined,
): number | undefined {
  const recorded = owner.staleAfterMs;
  if (foreignStaleAfterMs === undefined) return undefined;
  if (typeof recorded !== "number" || !Number.isFinite(recorded) || recorded <= 0) return undefined;
  return Math.max(foreignStaleAfterMs, recorded);
}

/**
 * Whether the owner of a lock is provably gone ("dead"), surely or possibly running ("alive"), or
 * cannot be judged by its pid at all (a string saying why: another host, boot or PID namespace).
 */
function judgeOwner(owner: LockFileOwner): "dead" | "alive" | string {
  if (owner.host !== hostname()) return `it was written on another host (${owner.host})`;
  const here = thisProcess();
  if (owner.bootId === undefined || here.bootId === undefined) {
    return "it records no boot id (written by an older version, or not on Linux)";
  }
  if (owner.bootId !== here.bootId) {
    return `it was written in another boot (boot id ${owner.bootId}, here ${here.bootId}): by this machine before a reboot, or by another machine of the same name`;
  }
  if (owner.pidNamespace === undefined || owner.pidNamespace !== here.pidNamespace) {
    return `it was written in another PID namespace (${owner.pidNamespace ?? "not recorded"}, here ${here.pidNamespace ?? "unknown"}), such as another container, where its pid ${owner.pid} means another process`;
  }
  if (owner.pid === process.pid) return held.has(owner.token) ? "alive" : "dead";
  if (!processAlive(owner.pid)) return "dead";
  // /proc of another namespace (unshare --pid without its own /proc) shows other processes.
  if (!here.procMatches) return "alive";
  const stat = procStat(String(owner.pid));
  if (!stat) return "alive";
  // A zombie has exited (its parent has not reaped it yet); another start time is a reused pid.
  if (stat.state === "Z") return "dead";
  return owner.processStart !== undefined && stat.start !== owner.processStart ? "dead" : "alive";
}

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    // EPERM: the process exists but belongs to another user.
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** State and start time (clock ticks since boot) from /proc/PID/stat; undefined off Linux. */
function procStat(pid: string): { state: string; start: string | undefined } | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    // The command name (field 2) may hold spaces and parentheses: count from the last ")".
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return { state: fields[0] ?? "", start: fields[19] };
  } catch {
    return undefined;
  }
}

/** ms since the file was last modified (0 when it is gone). */
function ageMs(path: string): number {
  try {
    return Date.now() - statSync(path).mtimeMs;
  } catch {
    return 0;
  }
}

/**
 * Creates `path` holding `owner`, failing (undefined) when it exists. The content is written to a
 * temp file first and hard-linked into place, so the lock is never seen empty or half written.
 */
function createExclusive(path: string, owner: LockFileOwner): Created | undefined {
  const temp = `${path}.${owner.pid}.${owner.token}.tmp`;
  const text = `${JSON.stringify(owner)}\n`;
  const fd = openSync(temp, "w", 0o644);
  let created: Created;
  try {
    // writeFileSync loops over short writes (a full disk), unlike one writeSync; it throws on errors.
    writeFileSync(fd, text);
    // The mtime a taker judges is set after `since`, never before (the kernel's own is coarser).
    const since = performance.now();
    const now = new Date();
    futimesSync(fd, now, now);
    fsyncSync(fd);
    const stat = fstatSync(fd);
    created = { text, dev: stat.dev, ino: stat.ino, since };
  } finally {
    closeSync(fd);
  }
  try {
    linkSync(temp, path);
    return created;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "EEXIST") return undefined;
    throw error;
  } finally {
    unlinkQuietly(temp);
  }
}

/** Removes temp files a crashed process left beside `path` (they never count as locks). */
function sweepTempFiles(path: string): void {
  const prefix = `${basename(path)}.`;
  const dir = dirname(path);
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return;
  }
  const now = Date.now();
  for (const name of names) {
    if (!name.startsWith(prefix) || !name.endsWith(".tmp")) continue;
    const file = join(dir, name);
    try {
      const stat = statSync(file);
      // A stale lock being removed keeps its old mtime, but its rename set its ctime.
      const at = name.endsWith(".stale.tmp") ? stat.ctimeMs : stat.mtimeMs;
      if (now - at > TEMP_MAX_AGE_MS) unlinkQuietly(file);
    } catch {
      // Gone already.
    }
  }
}

function unlinkQuietly(path: string): void {
  try {
    unlinkSync(path);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw error;
  }
}

function lockedError(
  path: string,
  options: LockFileOptions,
  owner: LockFileOwner | undefined,
  unreadable: boolean,
  note = "",
): LeafError {
  const resource = options.resource ?? `lock file ${path}`;
  const advice = options.advice ?? "stop that process, or use another lock file";
  let message: string;
  if (unreadable) {
    message =
      `${resource} is locked: lock file ${path} holds no owner record (damaged, or not written by ` +
      `@leaf); ${advice}; if you are sure no process uses it, delete the lock file`;
  } else if (!owner) {
    message =
      `${resource} is in use: lock file ${path} kept changing hands between processes racing ` +
      "for it; try again once they settle";
  } else {
    const since = Number.isFinite(owner.acquiredAt)
      ? new Date(owner.acquiredAt).toISOString()
      : "an unknown time";
    const label = owner.label ? ` for ${owner.label}` : "";
    let foreign = "";
    const verdict = judgeOwner(owner);
    if (verdict !== "dead" && verdict !== "alive") {
      const staleAfter = staleAfterFor(owner, options.foreignStaleAfterMs);
      const never =
        options.foreignStaleAfterMs === undefined
          ? "so it is never taken over"
          : "and its holder does not heartbeat the lock (it records no staleAfterMs: another setting or an older version), so it is never taken over by age";
      foreign =
        staleAfter === undefined
          ? `; its owner cannot be judged by pid since ${verdict}, ${never}: delete the lock file once you are sure that process is gone`
          : `; its owner cannot be judged by pid since ${verdict}, so it is taken over only once untouched for ${staleAfter} ms (last touched ${Math.round(ageMs(path))} ms ago)`;
    }
    message =
      `${resource} is in use: lock file ${path} is held by pid ${owner.pid} on host ` +
      `${owner.host}${label} since ${since}; ${advice}${foreign}${note}`;
  }
  return new LeafError({
    component: options.component ?? "core",
    code: options.code ?? ErrorCodes.LOCKED,
    message,
    details: { ...options.details, path, owner, unreadable },
  });
}
