// An exclusive lock file that survives crashes: created atomically with its owner inside (pid,
// host, boot id, PID namespace, process start time, a random token), and taken over only when that
// owner is provably gone, through a claim file so that two processes taking over the same stale
// lock never both win. With a staleness rule, a holder heartbeats its lock and publishes a fence
// deadline, so that a lock whose owner cannot be judged (another container, another boot) is taken
// over safely once it goes untouched.
import {
  closeSync,
  fstatSync,
  fsyncSync,
  futimesSync,
  linkSync,
  openSync,
  readdirSync,
  renameSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { basename, dirname, join } from "node:path";
import { delay } from "./backoff";
import { systemClock } from "./clock";
import { argumentError, ErrorCodes, LeafError } from "./errors";
import {
  type Created,
  type HeldLockFile,
  holdLock,
  type LockFileOptions,
  touch,
  unlinkQuietly,
} from "./held-lock-file";
import {
  ageMs,
  held,
  isStale,
  judgeOwner,
  type LockFileOwner,
  newOwner,
  randomToken,
  readLockFile,
  readOwnerToken,
  staleAfterFor,
} from "./lock-file-owner";

export type { HeldLockFile, LockFileOptions } from "./held-lock-file";
export { type LockFileOwner, readLockFile } from "./lock-file-owner";

/** Options of {@link acquireLockFileWaiting}. */
export interface LockFileWaitOptions extends LockFileOptions {
  /** Aborts the wait (rejecting with the signal's reason). */
  signal?: AbortSignal;
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
       * Set when the owner cannot be judged by its pid and `foreignStaleAfterMs` is given: the
       * instant (ms since the Unix epoch) from which the lock may be taken over if nobody touches
       * it before.
       */
      staleAt?: number;
    };

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
 * Takes the lock file at `path` like {@link acquireLockFile}, but when its owner cannot be judged
 * by pid and `foreignStaleAfterMs` is given, waits (at most about `foreignStaleAfterMs`) for the
 * lock to go untouched that long and then takes it over: a process restarted in a new container or
 * after a reboot gets its lock back by itself. Rejects with LOCKED (or `options.code`) at once when
 * the owner is alive (same PID namespace) or the file holds no owner record, and as soon as the
 * lock is touched or changes hands while waiting (its holder is alive); with the signal's reason on
 * abort.
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
          Object.assign(created, touch(path));
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

/** Removes the lock file at `path` if it still names `token`, and forgets the token. */
function release(path: string, token: string): void {
  try {
    if (readOwnerToken(path) === token) unlinkQuietly(path);
  } finally {
    held.delete(token);
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
    // writeFileSync loops over short writes (a full disk), unlike one writeSync; throws on errors.
    writeFileSync(fd, text);
    // The mtime a taker judges is set after `since`, never before (the kernel's own is coarser).
    const since = performance.now();
    const now = new Date();
    futimesSync(fd, now, now);
    fsyncSync(fd);
    const stat = fstatSync(fd);
    created = { text, dev: stat.dev, ino: stat.ino, since, sinceWall: now.getTime() };
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
          : "and its holder does not heartbeat the lock (it records no staleAfterMs: it took the lock without foreignStaleAfterMs), so it is never taken over by age";
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
