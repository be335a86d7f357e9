// The lease of a normal-mode worker id: it reports the highest timestamps to ZooKeeper and the
// cache file, and when its session is lost it takes its live marker again through a new session.
import {
  type BackupWorker,
  backoffDelay,
  delay,
  ErrorCodes,
  isLeafError,
  LeafError,
  type NodeIdentity,
} from "@leaf/core";
import { type CachedLease, LeaseCore, writeLeaseCache } from "@leaf/core/adapter";
import { claimMarker, holderData, lowestFor, type Slot } from "./normal-nodes";

export type { Slot } from "./normal-nodes";

import { COMPONENT } from "./options";
import {
  contestedKey,
  decodeEndpoint,
  encodeEndpoint,
  type LeafTree,
  nodeKey,
  parseForeverChild,
} from "./paths";
import type { RegistryContext, TrackedLease } from "./registry-context";
import { ZkCodes, zkCode } from "./zk-client";
import type { ZkSession } from "./zk-session";

/** Writes `lease`'s cache file; a failure is a configuration error naming the path. */
export function writeCacheOrRefuse(lease: NormalLease, cachePath: string | undefined): void {
  try {
    lease.writeCache();
  } catch (error) {
    throw new LeafError({
      component: COMPONENT,
      code: ErrorCodes.INVALID_CONFIG,
      message: `cannot write the cache file ${cachePath}: ${(error as Error).message}; fix the path or its permissions, or set cacheFile: false`,
      details: { key: "cacheFile", value: cachePath },
      cause: error,
    });
  }
}

/** A fixed worker id held by this node. */
export class NormalLease extends LeaseCore implements TrackedLease {
  /** This process's sessions that may still hold the marker: taken over, not a conflict. */
  private readonly previousSessions: string[];
  private session: ZkSession | undefined;
  private markerPath: string | undefined;
  /** Whether the lease ever held the marker (a lease from the cache file has not yet). */
  private attached = false;
  private reattaching: Promise<void> | undefined;
  /** Aborted by `release`: a connect for a report in flight ends then instead of delaying it. */
  private readonly ending = new AbortController();

  constructor(
    private readonly context: RegistryContext,
    private readonly node: NodeIdentity,
    private readonly tree: LeafTree,
    private readonly slots: Slot[],
    private readonly cachePath: string | undefined,
    ownSessions: readonly string[] = [],
  ) {
    const [primary, ...backups] = slots;
    super({
      component: COMPONENT,
      workerId: primary!.workerId,
      lastTimestamp: primary!.stored,
      backups: backups.map((s) => ({ workerId: s.workerId, lastTimestamp: s.stored })),
    });
    this.previousSessions = [...ownSessions];
  }

  /**
   * No deadline (as Java Leaf) unless `stopWithoutSession`; with it, the marker's session's
   * deadline (see ZkSession.fenceAt), 0 while the lease holds no marker after having held one (it
   * is taking it again), and none for a lease from a cache file that has not reached ZooKeeper yet.
   * (0 once lost or released: LeaseCore.)
   */
  protected override liveFenceAt(): number | undefined {
    if (!this.context.options.stopWithoutSession) return undefined;
    if (this.session) return this.session.fenceAt;
    return this.attached ? 0 : undefined;
  }

  protected async store(): Promise<void> {
    await this.write(true);
  }

  /**
   * Also writes the cache file at once, before the report waits for ZooKeeper: a restart of this
   * node reads it, so what it holds is confirmed (WorkerLease.confirmedTimestamp) even while
   * ZooKeeper is slow or down. A failed write is reported by the queued store.
   */
  override report(timestampMs: number, backups?: readonly BackupWorker[]): Promise<void> {
    const reporting = super.report(timestampMs, backups);
    if (this.cachePath && !this.lost.aborted && !this.released) {
      try {
        this.writeCache();
        this.confirm(this.workerId, this.highest(this.workerId));
      } catch {}
    }
    return reporting;
  }

  /**
   * Also ends at once a connect that a report in flight or a reattach waits for (a new session
   * would only be closed again): the release, queued behind them, writes the final timestamp to the
   * cache file without waiting out `connectTimeoutMs` while ZooKeeper is down.
   */
  override release(finalTimestampMs?: number): Promise<void> {
    const releasing = super.release(finalTimestampMs);
    if (this.released) {
      this.ending.abort(
        new LeafError({
          component: COMPONENT,
          code: ErrorCodes.CLOSED,
          message: `worker id ${this.workerId} lease was released: no more ZooKeeper writes for it`,
          details: { workerId: this.workerId },
        }),
      );
    }
    return releasing;
  }

  protected async free(finalTimestampMs: number | undefined): Promise<void> {
    if (!this.lost.aborted && finalTimestampMs !== undefined) {
      // The cache file keeps the final timestamp when ZooKeeper cannot be reached; a detached
      // lease does not wait for a new session just to say goodbye.
      await this.write(false).catch(() => {});
    }
    this.context.untrack(this);
    const session = this.session;
    this.session = undefined;
    if (session && this.markerPath) {
      await session.remove(this.markerPath, -1).catch(() => {});
    }
    await session?.close();
  }

  async shutdown(why: string): Promise<void> {
    const session = this.session;
    this.lose(why);
    await session?.close();
  }

  /** Takes `session` as the lease's connection; a lost session detaches it again. */
  attach(session: ZkSession, markerPath: string): void {
    this.session = session;
    this.markerPath = markerPath;
    this.attached = true;
    session.lost.addEventListener(
      "abort",
      () => {
        if (this.session !== session) return;
        this.previousSessions.push(session.sessionId);
        this.session = undefined;
        this.reattachSoon();
      },
      { once: true },
    );
    this.watchMarker(session, markerPath);
  }

  /**
   * Takes the marker again through a new session, at once and then with a growing pause (0.1 s to
   * 2 s) until it succeeds, the marker turns out to be another process's (lost), or the lease ends.
   * Ids keep flowing meanwhile, or stop (fenceAt is 0) with `stopWithoutSession`.
   */
  private reattachSoon(): void {
    if (this.reattaching) return;
    const closed = this.context.closed;
    const detached = () => !this.session && !this.lost.aborted && !this.released && !closed.aborted;
    this.reattaching = (async () => {
      for (let attempt = 0; detached(); attempt++) {
        try {
          await this.serial(async () => {
            if (detached()) await this.reattach();
          });
        } catch {
          await delay(backoffDelay(attempt, { initialMs: 100, maxMs: 2_000 }), closed).catch(
            () => {},
          );
        }
      }
    })().finally(() => {
      this.reattaching = undefined;
    });
  }

  /** Writes the cache file with the highest timestamps known. */
  writeCache(): void {
    if (!this.cachePath) return;
    const [primary, ...backups] = this.slots;
    const cached: CachedLease = {
      node: { name: this.node.name, ip: this.node.ip, port: this.node.port },
      workerId: primary!.workerId,
      timestamp: Math.max(primary!.stored, this.highest(primary!.workerId)),
      backups: backups.map((s) => ({
        workerId: s.workerId,
        lastTimestamp: Math.max(s.stored, this.highest(s.workerId)),
      })),
      registry: "zk",
    };
    writeLeaseCache(this.cachePath, cached);
  }

  /** Writes the highest timestamps to the cache file and, through a session, to ZooKeeper. */
  private async write(reattach: boolean): Promise<void> {
    let cacheError: unknown;
    try {
      this.writeCache();
      // A restart of this node reads the cache file too: what it holds is confirmed.
      if (this.cachePath) this.confirm(this.workerId, this.highest(this.workerId));
    } catch (error) {
      cacheError = error;
    }
    const session = this.session ?? (reattach ? await this.reattach() : undefined);
    if (session) for (const slot of this.slots) await this.writeSlot(session, slot);
    if (cacheError) {
      throw new LeafError({
        component: COMPONENT,
        code: ErrorCodes.UNAVAILABLE,
        message: `worker id ${this.workerId}: reported to ZooKeeper, but the cache file ${this.cachePath} could not be written: ${(cacheError as Error).message}`,
        details: { cacheFile: this.cachePath },
        cause: cacheError,
      });
    }
  }

  /** Compare-and-set of the stored timestamp: it only ever moves forward. */
  private async writeSlot(session: ZkSession, slot: Slot): Promise<void> {
    for (let attempt = 0; attempt < 5; attempt++) {
      if (slot.version === undefined) {
        const current = await session.getData(slot.path);
        if (!current) throw this.lose(`its ZooKeeper node ${slot.path} was deleted`);
        slot.stored = Math.max(slot.stored, decodeEndpoint(slot.path, current.data).timestamp);
        slot.version = current.stat.version;
      }
      const target = Math.max(slot.stored, this.highest(slot.workerId));
      try {
        const stat = await session.setData(
          slot.path,
          encodeEndpoint(this.node, target),
          slot.version,
        );
        slot.version = stat.version;
        slot.stored = target;
        return;
      } catch (error) {
        const code = zkCode(error);
        if (code === ZkCodes.BAD_VERSION) slot.version = undefined;
        else if (code === ZkCodes.NO_NODE) {
          throw this.lose(`its ZooKeeper node ${slot.path} was deleted`);
        } else throw error;
      }
    }
    throw new LeafError({
      component: COMPONENT,
      code: ErrorCodes.UNAVAILABLE,
      message: `worker id ${slot.workerId}: ${slot.path} kept changing under the report; another writer uses it`,
      details: { path: slot.path },
    });
  }

  /** Opens a new session after the last was lost, takes the marker again, checks the ids. */
  private async reattach(): Promise<ZkSession> {
    const options = this.context.options;
    const session = await this.context.openSession(
      AbortSignal.any([this.context.closed, this.ending.signal]),
    );
    try {
      // A lease from a cache file may meet a tree only Java Leaf wrote: no `temporary` yet.
      await session.ensurePath(this.tree.temporary);
      const marker = await claimMarker(session, this.tree, this.node, options, {
        previousSessions: this.previousSessions,
        wait: false,
        signal: this.context.closed,
      }).catch((error) => {
        if (isLeafError(error, ErrorCodes.WORKER_ID_IN_USE)) {
          this.context.contested.add(contestedKey(this.node));
          throw this.lose(`another process took ${nodeKey(this.node)}: ${error.message}`);
        }
        throw error;
      });
      const listing = await session.getChildren(this.tree.forever);
      const children = (listing?.children ?? [])
        .map(parseForeverChild)
        .filter((c) => c !== undefined);
      for (const slot of this.slots) {
        const own = lowestFor(children, slot.key);
        if (!own || own.sequence !== slot.workerId) {
          throw this.lose(
            own
              ? `ZooKeeper now gives ${slot.key} worker id ${own.sequence}`
              : `ZooKeeper has no node for ${slot.key} under ${this.tree.forever} any more`,
          );
        }
        slot.path = `${this.tree.forever}/${own.name}`;
        slot.version = undefined;
      }
      await session.setData(
        marker.path,
        holderData(this.node, this.workerId, session, options),
        -1,
      );
      this.checkUsable();
      this.attach(session, marker.path);
      return session;
    } catch (error) {
      await session.close();
      throw error;
    }
  }

  private watchMarker(session: ZkSession, path: string): void {
    const current = () => this.session === session && !this.released && !session.lost.aborted;
    session
      .exists(path, (type) => {
        if (!current()) return;
        if (type === "deleted") this.lose(`its live marker ${path} was deleted by another client`);
        else this.watchMarker(session, path);
      })
      .then((stat) => {
        // Deleted before the watch was set: the watch waits for a creation instead.
        if (!stat && current()) this.lose(`its live marker ${path} was deleted by another client`);
      })
      .catch(() => {});
  }

  /** The lease is lost: the registry stops tracking it and its session ends. */
  protected override onLost(): void {
    this.context.untrack(this);
    const session = this.session;
    this.session = undefined;
    void session?.close();
  }
}
