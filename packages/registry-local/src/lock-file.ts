// One exclusive lock file per worker id, so that two processes on one machine never hold the same
// id: created atomically with its owner inside (pid, host, process start time, a random token), and
// taken over only when that owner is provably gone, through a claim file so two takers cannot race.
import { randomBytes } from "node:crypto";
import {
  closeSync,
  fsyncSync,
  linkSync,
  openSync,
  readdirSync,
  readFileSync,
  statSync,
  unlinkSync,
  writeSync,
} from "node:fs";
import { hostname } from "node:os";
import { basename, dirname, join } from "node:path";

/** Who holds a lock file. */
export interface LockOwner {
  pid: number;
  host: string;
  /** The process's start time as the kernel counts it (Linux), to tell a reused pid apart. */
  processStart: string | undefined;
  /** Random per lock: says which holding this is, even within one process. */
  token: string;
  /** The node the worker id was leased to ("ip:port"), for the error message of a refused taker. */
  node: string;
  /** When the lock was taken, ms since the Unix epoch. */
  acquiredAt: number;
}

/** What {@link tryLock} found. */
export type LockAttempt =
  | { acquired: true }
  | { acquired: false; owner: LockOwner | undefined; unreadable?: boolean };

/** Tokens of the locks this process holds, shared by every copy of this module it loaded. */
const held: Set<string> = sharedHeldSet();

function sharedHeldSet(): Set<string> {
  const key = Symbol.for("@leaf/registry-local.heldLocks");
  const global = globalThis as Record<symbol, unknown>;
  if (!(global[key] instanceof Set)) global[key] = new Set<string>();
  return global[key] as Set<string>;
}

/** How many nested claims a takeover may need (each level only after a crash mid-takeover). */
const MAX_CLAIM_DEPTH = 3;
/** Leftover temp files of a crashed writer older than this are removed (ms). */
const TEMP_MAX_AGE_MS = 60_000;

/** An owner record for this process. */
export function newOwner(node: string): LockOwner {
  return {
    pid: process.pid,
    host: hostname(),
    processStart: processStart(process.pid),
    token: randomToken(),
    node,
    acquiredAt: Date.now(),
  };
}

/**
 * Takes the lock file at `path` for `owner`, or reports who holds it. A lock whose owner is gone
 * (same host and its pid is not running, runs a different process than the one that locked, or is
 * this very process without holding it, as after a container restart) is taken over; a lock written
 * on another host is never judged, since its pid means nothing here.
 */
export function tryLock(path: string, owner: LockOwner, depth = 0): LockAttempt {
  sweepTempFiles(path);
  for (let attempt = 0; attempt < 8; attempt++) {
    if (createExclusive(path, owner)) {
      held.add(owner.token);
      return { acquired: true };
    }
    const current = readOwner(path);
    if (current === undefined) continue; // released in between: try again
    if (current === "unreadable") return { acquired: false, owner: undefined, unreadable: true };
    if (!isStale(current)) return { acquired: false, owner: current };
    if (depth >= MAX_CLAIM_DEPTH) return { acquired: false, owner: current };
    // Only the process holding the claim for this stale token may remove the lock that names it.
    const claimPath = `${path}.${current.token}.claim`;
    const claimOwner = { ...owner, token: randomToken() };
    const claim = tryLock(claimPath, claimOwner, depth + 1);
    if (!claim.acquired) return { acquired: false, owner: claim.owner ?? current };
    try {
      const again = readOwner(path);
      if (typeof again === "object" && again.token === current.token) unlinkQuietly(path);
      if (createExclusive(path, owner)) {
        held.add(owner.token);
        return { acquired: true };
      }
      // Another process created the lock between our unlink and create: judge that owner next.
    } finally {
      unlock(claimPath, claimOwner.token);
    }
  }
  const last = readOwner(path);
  return { acquired: false, owner: typeof last === "object" ? last : undefined };
}

/** True while the lock file at `path` still names `token`. */
export function ownsLock(path: string, token: string): boolean {
  return readOwnerToken(path) === token;
}

/** Removes the lock file at `path` if it still names `token`. */
export function unlock(path: string, token: string): void {
  if (ownsLock(path, token)) unlinkQuietly(path);
  held.delete(token);
}

/** Reads the owner of a lock file: undefined when there is none, "unreadable" when it is damaged. */
export function readOwner(path: string): LockOwner | "unreadable" | undefined {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw error;
  }
  try {
    const value = JSON.parse(text) as Partial<LockOwner>;
    if (
      typeof value === "object" &&
      value !== null &&
      Number.isInteger(value.pid) &&
      typeof value.host === "string" &&
      typeof value.token === "string"
    ) {
      return value as LockOwner;
    }
  } catch {
    // fall through
  }
  return "unreadable";
}

function randomToken(): string {
  return randomBytes(12).toString("hex");
}

function readOwnerToken(path: string): string | undefined {
  const owner = readOwner(path);
  return typeof owner === "object" ? owner.token : undefined;
}

/** Whether the owner of a lock is provably gone. */
function isStale(owner: LockOwner): boolean {
  if (owner.host !== hostname()) return false;
  if (owner.pid === process.pid) return !held.has(owner.token);
  if (!processAlive(owner.pid)) return true;
  const stat = procStat(owner.pid);
  if (!stat) return false;
  // A zombie has exited (its parent has not reaped it yet); another start time is a reused pid.
  if (stat.state === "Z") return true;
  return owner.processStart !== undefined && stat.start !== owner.processStart;
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
function procStat(pid: number): { state: string; start: string | undefined } | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    // The command name (field 2) may hold spaces and parentheses: count from the last ")".
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return { state: fields[0] ?? "", start: fields[19] };
  } catch {
    return undefined;
  }
}

function processStart(pid: number): string | undefined {
  return procStat(pid)?.start;
}

/**
 * Creates `path` holding `owner`, failing when it exists. The content is written to a temp file
 * first and hard-linked into place, so the lock is never seen empty or half written.
 */
function createExclusive(path: string, owner: LockOwner): boolean {
  const temp = `${path}.${owner.pid}.${owner.token}.tmp`;
  const fd = openSync(temp, "w", 0o644);
  try {
    writeSync(fd, `${JSON.stringify(owner)}\n`);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  try {
    linkSync(temp, path);
    return true;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "EEXIST") return false;
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
      if (now - statSync(file).mtimeMs > TEMP_MAX_AGE_MS) unlinkQuietly(file);
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
