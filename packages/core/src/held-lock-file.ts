// A lock file this process holds: the record of the file it created (to tell it from any later
// one), the heartbeat that keeps it fresh and moves its fence deadline on, and its release.
import { readFileSync, statSync, unlinkSync, utimesSync } from "node:fs";
import { type ErrorCode, ErrorCodes, LeafError } from "./errors";
import { held, type LockFileOwner } from "./lock-file-owner";

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
   * clock). The holder heartbeats its lock every quarter of it: it checks that the file is still
   * its own, touches it, and checks again; `fenceAt` is the start of the last such heartbeat plus
   * half of it, and `lost` aborts once a heartbeat finds the file gone or replaced. A holder that
   * is merely paused (SIGSTOP, a VM freeze) for that long loses its lock this way: only use it when
   * the holder stops acting under the lock at `fenceAt` or checks `owns()` before and after every
   * write it makes under the lock, as the embedded segment store does. Processes sharing the folder
   * need clocks within a small part of this of each other (the same machine's clock, or NTP).
   */
  foreignStaleAfterMs?: number;
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
   * With `foreignStaleAfterMs`: the `performance.now()` instant (ms) after which this holder must
   * not act under the lock unless a later heartbeat moves it: the start of the last heartbeat that
   * found the file its own, touched it and found it its own again, plus half of
   * `foreignStaleAfterMs`. Another process takes the lock over only once it went untouched for all
   * of `foreignStaleAfterMs`, so a holder that stops at `fenceAt` has stopped before then, even
   * when it was paused. Undefined without `foreignStaleAfterMs` (the lock is then never taken over
   * from a live or unjudgeable holder).
   */
  readonly fenceAt: number | undefined;
  /**
   * With `foreignStaleAfterMs`: the latest wall-clock instant (ms since the Unix epoch) this holder
   * may act for: the mtime its last heartbeat wrote (that `fenceAt` counts from) + half of
   * `foreignStaleAfterMs`. A taker judges the lock by that mtime against its own wall clock and
   * takes it over only once its clock is `foreignStaleAfterMs` past it, so whatever a holder
   * timestamps no later than this is before anything a taker can do, also when the wall clock
   * stepped forward after the heartbeat while the monotonic `fenceAt` is still ahead. Undefined
   * without `foreignStaleAfterMs`.
   */
  readonly horizon: number | undefined;
  /**
   * Aborted once this holder finds the file is no longer its own (a heartbeat or `owns()` saw it
   * removed, replaced or taken over); the reason is a LeafError (LOCKED, or `options.code`).
   */
  readonly lost: AbortSignal;
  /**
   * Stops touching the lock and removes it if it is still the one this holder created. Idempotent.
   */
  release(): void;
}

/** What a lock file created by this process holds, to tell it apart from any later one. */
export interface Created {
  text: string;
  dev: number;
  ino: number;
  /** performance.now() read before the file's mtime was set: the start of its first "heartbeat". */
  since: number;
  /** The mtime then set (ms since the Unix epoch, this process's wall clock). */
  sinceWall: number;
}

/** A heartbeat: when it started (performance.now()) and the mtime it wrote (wall clock, ms). */
export interface Beat {
  since: number;
  sinceWall: number;
}

/** Sets the file's mtime to now; returns the performance.now() read before, and that mtime. */
export function touch(path: string): Beat {
  const since = performance.now();
  const now = new Date();
  utimesSync(path, now, now);
  return { since, sinceWall: now.getTime() };
}

export function holdLock(
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
  let lastBeat: Beat = { since: created.since, sinceWall: created.sinceWall };
  if (foreignStaleAfterMs !== undefined) {
    // Keeps the lock fresh for processes that judge it by its age alone, and moves fenceAt on.
    timer = setInterval(
      () => {
        try {
          if (!owns()) return;
          const beat = touch(path);
          // Touched a file that was taken over right before the touch: not a heartbeat of ours.
          if (owns()) lastBeat = beat;
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
      return foreignStaleAfterMs === undefined
        ? undefined
        : lastBeat.since + foreignStaleAfterMs / 2;
    },
    get horizon() {
      return foreignStaleAfterMs === undefined
        ? undefined
        : lastBeat.sinceWall + foreignStaleAfterMs / 2;
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

export function unlinkQuietly(path: string): void {
  try {
    unlinkSync(path);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw error;
  }
}
