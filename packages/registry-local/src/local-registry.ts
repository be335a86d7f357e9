// A worker-id registry without a server: the id comes from configuration (one id, or the fork's
// workIdMap), a lock file per id keeps a second process on this machine off it, and a cache file
// per id, rewritten atomically on every report, keeps its last timestamp across restarts. The
// holder heartbeats its lock and its lease publishes a fence deadline, so a lock left by a process
// that cannot be judged (another container, another boot) is taken over safely once it goes
// untouched.
import { mkdirSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";
import {
  type AcquireRequest,
  type Clock,
  configError,
  ErrorCodes,
  isLeafError,
  LeafError,
  type NodeIdentity,
  systemClock,
  type WorkerIdRegistry,
} from "@leaf/core";
import {
  acquireLockFileWaiting,
  checkAcquireRequest,
  checkClockNotBehind,
  type HeldLockFile,
  LeaseCore,
  readLeaseCache,
  writeLeaseCache,
} from "@leaf/core/adapter";
import { type StatefulSetId, type StatefulSetOptions, statefulSetWorkerId } from "./stateful-set";
import {
  COMPONENT,
  parseWorkIdMap,
  toWorkerId,
  type WorkIdMap,
  type WorkIdMapValue,
} from "./work-id-map";

/**
 * Options of {@link LocalRegistry}. Give exactly one of `workerId`, `workIdMap` and `statefulSet`.
 */
export interface LocalRegistryOptions {
  /**
   * The worker id of every node this registry serves (one process, one node), or a list: the
   * primary id, then backup ids.
   */
  workerId?: WorkIdMapValue;
  /**
   * The fork's `leaf.snowflake.local.workIdMap`: `{"ip:port": workerId}` as an object or JSON text.
   * A node missing from it is refused with INVALID_CONFIG.
   */
  workIdMap?: WorkIdMap;
  /**
   * Kubernetes: the worker id is the pod's StatefulSet ordinal (from its name, `leaf-3` -> 3) plus
   * `offset` (with `processes` per pod: `offset + ordinal * processes + process`). `true` reads the
   * name from HOSTNAME. Put `dir` on the pod's own volume (a
   * volumeClaimTemplate), so the last timestamp moves with the pod.
   */
  statefulSet?: StatefulSetOptions | true;
  /**
   * Folder of the lock and cache files; processes share a worker id space through it. Default
   * `~/.leaf/registry-local`. Put it on persistent local storage: the cache is what refuses a start
   * with a clock behind the last issued id after a reboot.
   */
  dir?: string;
  /**
   * How far (ms) the clock may be behind the cached timestamp at acquire and still be waited out by
   * the generator; further behind, acquire rejects with CLOCK_BEHIND_LEASE (default 5, as the
   * generator's rollback tolerance).
   */
  toleranceMs?: number;
  /**
   * How long (ms) a lock whose holder cannot be judged by its pid (written in another PID namespace
   * such as a previous container, or in another boot) must go untouched before another process
   * takes its worker id over (default 10,000). A holder touches its lock every
   * quarter of this and stops issuing ids half of this after its last successful touch (the lease's
   * `fenceAt`), so a paused holder stops before its id can be taken. A restart in a new container
   * or after a reboot waits at most about this long for its id. At least 100.
   */
  staleAfterMs?: number;
  /** Clock read for the start check (default: the system clock). */
  clock?: Clock;
}

/**
 * A {@link WorkerIdRegistry} whose ids come from configuration. Each worker id has, under
 * `dir/<service name>/`, a lock file (`worker-N.lock`, held while a lease lives, taken over only
 * from a dead process) and a cache file (`worker-N.json`, the highest timestamp reported for it).
 */
export class LocalRegistry implements WorkerIdRegistry {
  readonly kind = "local";
  /** The folder holding every service's lock and cache files. */
  readonly dir: string;
  private readonly fixedIds: number[] | undefined;
  private readonly map: Map<string, number[]> | undefined;
  /** The pod's name and ordinal when the id comes from a StatefulSet. */
  readonly pod: StatefulSetId | undefined;
  private readonly toleranceMs: number;
  private readonly staleAfterMs: number;
  private readonly clock: Clock;
  private closed = false;

  constructor(options: LocalRegistryOptions) {
    const sources = (["workerId", "workIdMap", "statefulSet"] as const).filter(
      (key) => options[key] !== undefined,
    );
    if (sources.length !== 1) {
      throw configError(
        COMPONENT,
        "workerId / workIdMap / statefulSet",
        {
          workerId: options.workerId,
          workIdMap: options.workIdMap,
          statefulSet: options.statefulSet,
        },
        "exactly one of them: workerId for a single node, workIdMap for several, statefulSet for a " +
          "Kubernetes StatefulSet's pods",
      );
    }
    if (options.statefulSet !== undefined) {
      this.pod = statefulSetWorkerId(options.statefulSet);
      this.fixedIds = [this.pod.workerId];
    } else if (options.workerId !== undefined) {
      const list: readonly unknown[] = Array.isArray(options.workerId)
        ? options.workerId
        : [options.workerId];
      if (list.length === 0) {
        throw configError(COMPONENT, "workerId", options.workerId, "a worker id");
      }
      this.fixedIds = list.map((value) => toWorkerId(value, "workerId"));
      if (new Set(this.fixedIds).size !== this.fixedIds.length) {
        throw configError(COMPONENT, "workerId", options.workerId, "distinct worker ids");
      }
    } else {
      this.map = parseWorkIdMap(options.workIdMap as WorkIdMap);
    }
    this.dir = options.dir ?? join(homedir(), ".leaf", "registry-local");
    if (typeof this.dir !== "string" || this.dir === "") {
      throw configError(COMPONENT, "dir", options.dir, "a folder path");
    }
    const tolerance = options.toleranceMs ?? 5;
    if (!Number.isSafeInteger(tolerance) || tolerance < 0) {
      throw configError(
        COMPONENT,
        "toleranceMs",
        options.toleranceMs,
        "an integer of 0 or more ms",
      );
    }
    this.toleranceMs = tolerance;
    const staleAfter = options.staleAfterMs ?? 10_000;
    if (!Number.isSafeInteger(staleAfter) || staleAfter < 100) {
      throw configError(
        COMPONENT,
        "staleAfterMs",
        options.staleAfterMs,
        "an integer of at least 100 ms (default 10000)",
      );
    }
    this.staleAfterMs = staleAfter;
    this.clock = options.clock ?? systemClock;
  }

  /** Folder of one service's lock and cache files. */
  serviceDir(name: string): string {
    return join(this.dir, encodeURIComponent(name));
  }

  async acquire(request: AcquireRequest): Promise<LocalLease> {
    if (this.closed) {
      throw new LeafError({
        component: COMPONENT,
        code: ErrorCodes.CLOSED,
        message: "registry is closed: create a new LocalRegistry to acquire again",
      });
    }
    const { node, key, maxWorkerId, backups } = checkAcquireRequest(COMPONENT, request);
    const ids = this.idsFor(node, backups);
    for (const id of ids) {
      if (id > maxWorkerId) {
        const pod = this.pod;
        throw new LeafError({
          component: COMPONENT,
          code: ErrorCodes.WORKER_IDS_EXHAUSTED,
          message: pod
            ? `worker id ${id} of pod ${pod.hostname} (ordinal ${pod.ordinal}${pod.processes > 1 ? ` x ${pod.processes} processes + process ${pod.process}` : ""} + offset ${pod.offset}) ` +
              `is outside the layout's range 0..${maxWorkerId}; the StatefulSet has more replicas ` +
              "than the layout has worker ids past its offset: lower the offset or the replicas, " +
              "or use a layout with more worker bits"
            : `worker id ${id} configured for ${key} is outside the layout's range 0..${maxWorkerId}; ` +
              "configure an id inside the range (or a layout with more worker bits)",
          details: { workerId: id, maxWorkerId, node: key, ...(pod ? { pod: pod.hostname } : {}) },
        });
      }
    }
    const folder = this.serviceDir(node.name);
    const holds: Hold[] = [];
    try {
      for (const id of ids) holds.push(await this.lock(folder, id, key, request.signal));
      for (const hold of holds) hold.stored = readStored(hold, node);
      const primary = holds[0]!;
      checkClockNotBehind({
        component: COMPONENT,
        lastTimestamp: primary.stored,
        now: this.clock.now(),
        toleranceMs: this.toleranceMs,
        source: `cache file ${primary.cacheFile}`,
        workerId: primary.workerId,
      });
      for (const hold of holds) writeStored(hold, node);
    } catch (error) {
      for (const hold of holds) hold.lock.release();
      throw error;
    }
    return new LocalLease(node, holds);
  }

  /** Stops nothing (the registry has no timers) and refuses further acquires; leases stay held. */
  async close(): Promise<void> {
    this.closed = true;
  }

  private idsFor(node: NodeIdentity, backups: number): number[] {
    const key = `${node.ip}:${node.port}`;
    let ids = this.fixedIds;
    if (!ids) {
      ids = this.map!.get(key);
      if (!ids) {
        const known = [...this.map!.keys()];
        const listed = known.slice(0, 5).join(", ") + (known.length > 5 ? ", ..." : "");
        throw new LeafError({
          component: COMPONENT,
          code: ErrorCodes.INVALID_CONFIG,
          message:
            `node ${key} is not in workIdMap (it lists ${listed}); add "${key}": <worker id> to ` +
            "workIdMap (leaf.snowflake.local.workIdMap), or check the ip and port this node reports",
          details: { key: "workIdMap", node: key },
        });
      }
    }
    if (ids.length < backups + 1 && this.pod) {
      throw new LeafError({
        component: COMPONENT,
        code: ErrorCodes.WORKER_IDS_EXHAUSTED,
        message:
          `${backups} backup worker id(s) requested for pod ${this.pod.hostname}, but a StatefulSet ` +
          "pod has exactly one worker id (its ordinal): run without backup ids",
        details: { node: key, pod: this.pod.hostname, backups },
      });
    }
    if (ids.length < backups + 1) {
      throw new LeafError({
        component: COMPONENT,
        code: ErrorCodes.WORKER_IDS_EXHAUSTED,
        message:
          `${backups} backup worker id(s) requested for ${key}, but the configuration gives it ` +
          `${ids.length - 1}; list backup ids after the primary one, e.g. "${key}": [${ids[0]}, ...]`,
        details: { node: key, configured: ids, backups },
      });
    }
    return ids.slice(0, backups + 1);
  }

  /**
   * Takes the lock of `workerId`: at once from a provably dead holder, after waiting for it to go
   * untouched for `staleAfterMs` from a holder that cannot be judged (another container or boot).
   */
  private async lock(
    folder: string,
    workerId: number,
    key: string,
    signal: AbortSignal | undefined,
  ): Promise<Hold> {
    const lockFile = join(folder, `worker-${workerId}.lock`);
    let lock: HeldLockFile;
    try {
      mkdirSync(folder, { recursive: true });
      lock = await acquireLockFileWaiting(lockFile, {
        component: COMPONENT,
        label: `node ${key}`,
        resource: `worker id ${workerId}`,
        advice: "stop that process, or give this node another worker id",
        code: ErrorCodes.WORKER_ID_IN_USE,
        details: { workerId, lockFile },
        foreignStaleAfterMs: this.staleAfterMs,
        ...(signal ? { signal } : {}),
      });
    } catch (error) {
      if (isLeafError(error) || signal?.aborted) throw error;
      throw new LeafError({
        component: COMPONENT,
        code: ErrorCodes.INVALID_CONFIG,
        message:
          `cannot use ${folder} for worker id locks: ${(error as Error).message}; set dir to a ` +
          "writable folder on local storage",
        details: { key: "dir", value: this.dir },
        cause: error,
      });
    }
    return {
      workerId,
      lockFile,
      cacheFile: join(folder, `worker-${workerId}.json`),
      lock,
      stored: 0,
    };
  }
}

/** One worker id held by a lease: its files, its held lock, its highest timestamp. */
interface Hold {
  workerId: number;
  lockFile: string;
  cacheFile: string;
  lock: HeldLockFile;
  stored: number;
}

/**
 * A worker id (and its backups) held through a {@link LocalRegistry}. Its locks are heartbeated
 * while it is held: `fenceAt` is the earliest of their fence deadlines, and `lost` aborts as soon
 * as one of them is found removed, replaced or taken over.
 */
export class LocalLease extends LeaseCore {
  /** The lock file of the primary id: while it names this lease, no other process holds the id. */
  readonly lockFile: string;
  /** The cache file of the primary id, holding the highest timestamp reported for it. */
  readonly cacheFile: string;
  /**
   * A process of this machine takes a dead holder's lock at once and starts from the cache file,
   * not after the locks' horizon: ids stop at the earlier of that horizon and the cache file's
   * issue floor (WorkerLease.successorStartsFromConfirmed). Without it, a wall clock stepped
   * forward between two reports carried ids past the cache file with the heartbeat's horizon, and
   * a holder killed then was followed by one issuing them again.
   */
  readonly successorStartsFromConfirmed = true;

  constructor(
    readonly node: NodeIdentity,
    private readonly holds: Hold[],
  ) {
    const primary = holds[0]!;
    super({
      component: COMPONENT,
      workerId: primary.workerId,
      lastTimestamp: primary.stored,
      backups: holds.slice(1).map((h) => ({ workerId: h.workerId, lastTimestamp: h.stored })),
    });
    this.lockFile = primary.lockFile;
    this.cacheFile = primary.cacheFile;
    for (const hold of holds) {
      if (hold.lock.lost.aborted) this.loseHold(hold);
      else hold.lock.lost.addEventListener("abort", () => this.loseHold(hold), { once: true });
    }
  }

  /**
   * The `performance.now()` instant after which no id may be issued under this lease unless a
   * heartbeat of its locks moves it later: half of `staleAfterMs` after the start of the last
   * heartbeat that found every lock its own. Another process takes an id over only once its lock
   * went untouched for all of `staleAfterMs`. (0 once lost or released.)
   */
  protected override liveFenceAt(): number | undefined {
    let earliest: number | undefined;
    for (const hold of this.holds) {
      const at = hold.lock.fenceAt;
      if (at !== undefined && (earliest === undefined || at < earliest)) earliest = at;
    }
    return earliest;
  }

  /**
   * The latest timestamp (wall clock, ms) ids may carry (see WorkerLease.horizon): the mtime the
   * last heartbeat of every lock wrote + half of `staleAfterMs`, the earliest of them. Another
   * process takes an id over only once its wall clock is `staleAfterMs` past that mtime, so a wall
   * clock stepped forward makes the generator stop at once rather than issue in the taker's time.
   */
  protected override liveHorizon(): number | undefined {
    let earliest: number | undefined;
    for (const hold of this.holds) {
      const at = hold.lock.horizon;
      if (at !== undefined && (earliest === undefined || at < earliest)) earliest = at;
    }
    return earliest;
  }

  /**
   * Checks that this process still holds every lock (a lock file removed or taken over means the
   * lease is lost: `lost` aborts and the report rejects with LEASE_LOST), then rewrites the cache
   * files atomically with the highest timestamp seen. Rejects with UNAVAILABLE when a file cannot
   * be written.
   */
  protected async store(reported: ReadonlyMap<number, number>): Promise<void> {
    this.checkLocks();
    for (const hold of this.holds) {
      if (!reported.has(hold.workerId)) continue;
      hold.stored = Math.max(hold.stored, this.highest(hold.workerId));
      writeStored(hold, this.node);
    }
  }

  /**
   * Writes the final timestamp (when given and the lease is not lost) and removes the locks that
   * still name this lease.
   */
  protected async free(finalTimestampMs: number | undefined): Promise<void> {
    try {
      if (finalTimestampMs !== undefined && !this.lost.aborted) {
        await this.store(new Map([[this.workerId, finalTimestampMs]]));
      }
    } catch (error) {
      // A lease found lost while releasing has nothing left to release.
      if (!isLeafError(error, ErrorCodes.LEASE_LOST)) throw error;
    } finally {
      for (const hold of this.holds) hold.lock.release();
    }
  }

  private checkLocks(): void {
    for (const hold of this.holds) {
      if (!hold.lock.owns()) throw this.loseHold(hold);
    }
  }

  /** Aborts `lost` (once) because `hold`'s lock is no longer this lease's; returns the reason. */
  private loseHold(hold: Hold): LeafError {
    return this.lose(
      `lock file ${hold.lockFile} was removed or taken over by another process (a lock goes ` +
        "untouched while its holder is paused)",
      {
        workerId: hold.workerId,
        advice: "stop issuing ids under this id",
        details: { lockFile: hold.lockFile },
        cause: hold.lock.lost.aborted ? hold.lock.lost.reason : undefined,
      },
    );
  }
}

/** The highest timestamp in a worker id's cache file (0 when there is none). */
function readStored(hold: Hold, node: NodeIdentity): number {
  const cached = readLeaseCache(hold.cacheFile, COMPONENT);
  if (!cached) return 0;
  if (cached.workerId !== hold.workerId) {
    throw new LeafError({
      component: COMPONENT,
      code: ErrorCodes.CORRUPT_DATA,
      message:
        `cache file ${hold.cacheFile} holds worker id ${cached.workerId}, not ${hold.workerId}; ` +
        `it was copied or edited by hand: restore it or delete it (node ${node.ip}:${node.port})`,
      details: { path: hold.cacheFile },
    });
  }
  return cached.timestamp;
}

function writeStored(hold: Hold, node: NodeIdentity): void {
  try {
    writeLeaseCache(hold.cacheFile, {
      node: { name: node.name, ip: node.ip, port: node.port },
      workerId: hold.workerId,
      timestamp: hold.stored,
      registry: "local",
    });
  } catch (error) {
    throw new LeafError({
      component: COMPONENT,
      code: ErrorCodes.UNAVAILABLE,
      message: `could not write cache file ${hold.cacheFile}: ${(error as Error).message}`,
      details: { path: hold.cacheFile },
      cause: error,
    });
  }
}
