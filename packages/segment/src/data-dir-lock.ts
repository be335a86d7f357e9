// The lock that keeps a second process off an embedded store's data folder: a lock file created
// exclusively, naming its owner (pid, host, a random token) and touched periodically, so that a lock
// left by a crashed process is recognised as stale and taken over, and a live one never is.
import { randomBytes } from "node:crypto";
import {
  closeSync,
  fsyncSync,
  linkSync,
  openSync,
  readFileSync,
  renameSync,
  statSync,
  unlinkSync,
  utimesSync,
  writeSync,
} from "node:fs";
import { hostname } from "node:os";
import { ErrorCodes, LeafError } from "@leaf/core";
import { COMPONENT } from "./validation";

/** Who holds a lock file. */
interface LockOwner {
  pid: number;
  host: string;
  token: string;
  startedAt: number;
}

/** Tokens of the locks held by this process, shared by every copy of this module it loaded. */
const held: Set<string> = heldLocks();

function heldLocks(): Set<string> {
  const registry = globalThis as Record<symbol, unknown>;
  const key = Symbol.for("@leaf/segment.heldLocks");
  if (!(registry[key] instanceof Set)) registry[key] = new Set<string>();
  return registry[key] as Set<string>;
}

/** Options of {@link acquireDirLock}. */
export interface DirLockOptions {
  /**
   * A lock written on another host (shared file system) counts as stale once it has not been
   * touched for this long, in ms (default 30,000). The holder touches it every third of that.
   */
  staleAfterMs?: number;
}

/** A held lock: release it on close. */
export interface DirLock {
  readonly path: string;
  release(): void;
}

/**
 * Takes the lock file at `path`, or throws LOCKED naming the holder. A lock whose holder is gone
 * (same host: the pid is not running, or is this process without holding it, as after a restart in
 * a container; another host: not touched for `staleAfterMs`) is taken over.
 */
export function acquireDirLock(path: string, options: DirLockOptions = {}): DirLock {
  const staleAfterMs = options.staleAfterMs ?? 30_000;
  const me: LockOwner = {
    pid: process.pid,
    host: hostname(),
    token: randomBytes(12).toString("hex"),
    startedAt: Date.now(),
  };
  for (let attempt = 0; attempt < 10; attempt++) {
    if (tryCreate(path, me)) return holdLock(path, me, staleAfterMs);
    const owner = readOwner(path);
    if (owner === "missing") continue;
    if (owner === "unreadable") {
      // Being written right now, or left half-written by a crash: stale once old enough.
      if (ageMs(path) < 5_000) {
        throw lockedError(
          path,
          "a lock file that is being written (another process is opening the store)",
        );
      }
    } else if (isLive(owner, path, staleAfterMs)) {
      throw lockedError(
        path,
        `pid ${owner.pid} on host ${owner.host} (since ${new Date(owner.startedAt).toISOString()})`,
      );
    }
    removeStale(path, owner);
  }
  throw lockedError(path, "other processes racing for it");
}

function tryCreate(path: string, me: LockOwner): boolean {
  let fd: number;
  try {
    fd = openSync(path, "wx", 0o644);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "EEXIST") return false;
    throw error;
  }
  try {
    writeSync(fd, `${JSON.stringify(me)}\n`);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  held.add(me.token);
  return true;
}

function holdLock(path: string, me: LockOwner, staleAfterMs: number): DirLock {
  const timer = setInterval(
    () => {
      try {
        const now = new Date();
        utimesSync(path, now, now);
      } catch {
        // The folder went away or became read-only; the next journal write reports it.
      }
    },
    Math.max(1_000, Math.floor(staleAfterMs / 3)),
  );
  timer.unref();
  let released = false;
  return {
    path,
    release() {
      if (released) return;
      released = true;
      clearInterval(timer);
      held.delete(me.token);
      const owner = readOwner(path);
      if (typeof owner === "object" && owner.token === me.token) {
        try {
          unlinkSync(path);
        } catch {
          // Already gone.
        }
      }
    },
  };
}

function readOwner(path: string): LockOwner | "missing" | "unreadable" {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return "missing";
    throw error;
  }
  try {
    const value = JSON.parse(text) as LockOwner;
    if (
      Number.isInteger(value.pid) &&
      typeof value.host === "string" &&
      typeof value.token === "string"
    ) {
      return value;
    }
  } catch {
    // Falls through.
  }
  return "unreadable";
}

function isLive(owner: LockOwner, path: string, staleAfterMs: number): boolean {
  if (owner.host !== hostname()) return ageMs(path) < staleAfterMs;
  if (owner.pid === process.pid) return held.has(owner.token);
  try {
    process.kill(owner.pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** Moves a stale lock aside, checking it is still the stale one (not a fresh lock of a racer). */
function removeStale(path: string, stale: LockOwner | "unreadable"): void {
  const aside = `${path}.stale-${process.pid}-${randomBytes(4).toString("hex")}`;
  try {
    renameSync(path, aside);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return;
    throw error;
  }
  const moved = readOwner(aside);
  const same =
    stale === "unreadable"
      ? moved === "unreadable"
      : typeof moved === "object" && moved.token === stale.token;
  if (!same) {
    // A racer's fresh lock: put it back (fails harmlessly when another lock took the place).
    try {
      linkSync(aside, path);
    } catch {
      // Someone holds the path now; the loop re-reads it.
    }
  }
  try {
    unlinkSync(aside);
  } catch {
    // Already gone.
  }
}

function ageMs(path: string): number {
  try {
    return Date.now() - statSync(path).mtimeMs;
  } catch {
    return 0;
  }
}

function lockedError(path: string, holder: string): LeafError {
  return new LeafError({
    component: COMPONENT,
    code: ErrorCodes.LOCKED,
    message:
      `the data folder is in use: lock file ${path} is held by ${holder}. Only one process may use ` +
      `an embedded segment store; stop the other one, give this one another folder, or use the ` +
      `MySQL store to share ranges between processes. If you are sure no process uses it, delete the lock file`,
    details: { path, holder },
  });
}
