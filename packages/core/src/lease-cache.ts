// The local cache a registry keeps of its last lease, for starting when its backing store cannot be
// reached. Written atomically (temp file, fsync, rename), so a crash mid-write leaves the old file
// or the new one, never a torn one. Used only after the timestamp check passes (Java Leaf #97).
import {
  closeSync,
  fsyncSync,
  mkdirSync,
  openSync,
  readFileSync,
  renameSync,
  unlinkSync,
  writeFileSync,
} from "node:fs";
import { dirname } from "node:path";
import { ErrorCodes, LeafError } from "./errors";
import type { BackupWorker, NodeIdentity } from "./registry";

/** Contents of a lease cache file. */
export interface CachedLease {
  /** The node the id was leased to. */
  node: NodeIdentity;
  workerId: number;
  /** Highest timestamp (ms since the Unix epoch) the node reported for the id. */
  timestamp: number;
  backups?: BackupWorker[];
  /** Which registry wrote it ("zk", "mysql", "local"). */
  registry: string;
}

let tempCounter = 0;

/**
 * Replaces `path` with `content` atomically and durably (temp file + fsync + rename + dir fsync).
 * `beforeReplace`, when given, runs after the fsync and just before the rename: if it throws, the
 * temp file is removed, `path` is left as it was, and the error is thrown (a holder checks there
 * that the file is still its own, since the fsync may have stalled the process for long).
 */
export function writeFileAtomic(path: string, content: string, beforeReplace?: () => void): void {
  mkdirSync(dirname(path), { recursive: true });
  const temp = `${path}.${process.pid}.${tempCounter++}.tmp`;
  const fd = openSync(temp, "w", 0o644);
  try {
    // writeFileSync writes every byte (one writeSync may write fewer on a full disk) or throws.
    writeFileSync(fd, content);
    fsyncSync(fd);
  } catch (error) {
    closeSync(fd);
    try {
      unlinkSync(temp);
    } catch {
      // Removed already; a leftover temp file is never read as the real one.
    }
    throw error;
  }
  closeSync(fd);
  try {
    beforeReplace?.();
  } catch (error) {
    unlinkSync(temp);
    throw error;
  }
  renameSync(temp, path);
  try {
    const dirFd = openSync(dirname(path), "r");
    try {
      fsyncSync(dirFd);
    } finally {
      closeSync(dirFd);
    }
  } catch {
    // Some file systems refuse fsync on a directory; the rename itself is still atomic.
  }
}

/** A file's text, or undefined when it does not exist; other file system errors are thrown. */
export function readTextIfExists(path: string): string | undefined {
  try {
    return readFileSync(path, "utf8");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw error;
  }
}

/** Writes a lease cache file atomically. */
export function writeLeaseCache(path: string, lease: CachedLease): void {
  writeFileAtomic(path, `${JSON.stringify(lease, null, 2)}\n`);
}

/**
 * Reads a lease cache file. Returns undefined when there is none; throws CORRUPT_DATA when it
 * exists but is not a lease cache, naming the file and what is wrong.
 */
export function readLeaseCache(path: string, component = "core"): CachedLease | undefined {
  const text = readTextIfExists(path);
  if (text === undefined) return undefined;
  const corrupt = (what: string) =>
    new LeafError({
      component,
      code: ErrorCodes.CORRUPT_DATA,
      message: `lease cache ${path} is not usable: ${what}; delete it to start without the cache`,
      details: { path },
    });
  let data: unknown;
  try {
    data = JSON.parse(text);
  } catch {
    throw corrupt("not JSON");
  }
  const value = data as Partial<CachedLease>;
  if (!value || typeof value !== "object") throw corrupt("not an object");
  if (!Number.isInteger(value.workerId) || (value.workerId as number) < 0) {
    throw corrupt(`workerId ${JSON.stringify(value.workerId)} is not a non-negative integer`);
  }
  if (!Number.isSafeInteger(value.timestamp) || (value.timestamp as number) < 0) {
    throw corrupt(`timestamp ${JSON.stringify(value.timestamp)} is not a time in ms`);
  }
  if (!value.node || typeof value.node.ip !== "string" || !Number.isInteger(value.node.port)) {
    throw corrupt("node is missing its ip or port");
  }
  return value as CachedLease;
}

/** Options of {@link checkClockNotBehind}. */
export interface ClockCheck {
  component: string;
  /** The highest timestamp (ms) issued or reported before. */
  lastTimestamp: number;
  /** The clock now (ms). */
  now: number;
  /** How far the clock may be behind (ms) and still be waited out. */
  toleranceMs: number;
  /** Where lastTimestamp came from, for the message ("ZooKeeper node ...", "cache file ..."). */
  source: string;
  workerId?: number;
}

/**
 * Throws CLOCK_BEHIND_LEASE, with both times in the message, when the clock is behind
 * `lastTimestamp` by more than the tolerance. Returns how many ms to wait (0 when not behind).
 */
export function checkClockNotBehind(check: ClockCheck): number {
  const behind = check.lastTimestamp - check.now;
  if (behind <= 0) return 0;
  if (behind > check.toleranceMs) {
    const worker = check.workerId === undefined ? "" : ` for worker id ${check.workerId}`;
    throw new LeafError({
      component: check.component,
      code: ErrorCodes.CLOCK_BEHIND_LEASE,
      message:
        `refusing to start: the clock (${iso(check.now)}, ${check.now}) is ${behind} ms behind the ` +
        `last timestamp${worker} in ${check.source} (${iso(check.lastTimestamp)}, ${check.lastTimestamp}); ` +
        `tolerance is ${check.toleranceMs} ms. Fix the clock (NTP) or wait until it passes that time`,
      details: { now: check.now, lastTimestamp: check.lastTimestamp, behindMs: behind },
    });
  }
  return behind;
}

function iso(ms: number): string {
  return new Date(ms).toISOString();
}
