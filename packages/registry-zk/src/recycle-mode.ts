// Recycle mode (Java Leaf issue #84, done without the fork's races): worker id N is held by the
// ephemeral node `recycle/leases/N`, created in one ZooKeeper transaction with a compare-and-set on
// the persistent record `recycle/workers/N` that keeps the highest timestamp ever reported under N.
// Taking an id is that one atomic step, never delete-then-create; an id is free exactly when its
// lease node is gone, which ZooKeeper does when the holder's session ends. The holder fences
// itself (lost, code -4; `fenceAt` for the generator) before the leader could expire its session:
// see ZkSession. The record also keeps the holder's horizon (its wall clock + `silenceLimitMs`,
// rewritten every third of that), past which it issues nothing and after which the next holder
// starts, so a wall clock stepped forward cannot carry ids into the next holder's time.
import {
  ErrorCodes,
  isLeafError,
  LeafError,
  type NodeIdentity,
  type WorkerLease,
} from "@leaf/core";
import {
  bareMessage,
  type CheckedAcquireRequest,
  checkClockNotBehind,
  LeaseCore,
} from "@leaf/core/adapter";
import { COMPONENT } from "./options";
import {
  decodeHolder,
  decodeRecord,
  encodeHolder,
  encodeRecord,
  type LeafTree,
  leafTree,
  nodeKey,
  type WorkerRecord,
} from "./paths";
import { checkPeerClocks, type PeerReport } from "./peer-clock";
import type { RegistryContext, TrackedLease } from "./registry-context";
import { type MultiOp, type NodeStat, ZkCodes, zkCode } from "./zk-client";
import type { ZkSession } from "./zk-session";

/** Rounds of list-and-take before giving up on a pool that keeps changing. */
const ROUNDS = 5;

/** One id of the pool as last read. */
interface PoolEntry {
  record: WorkerRecord;
  stat: NodeStat;
}

/** The pool as last read: which ids are leased, and the records. */
interface PoolView {
  held: Set<number>;
  records: Map<number, PoolEntry>;
}

/** One id held by a lease. */
interface Slot {
  workerId: number;
  leasePath: string;
  recordPath: string;
  /** Highest timestamp stored in the record (with the previous holder's horizon folded in). */
  stored: number;
  /** The horizon this lease last stored in the record (0 before its first write). */
  horizon: number;
  recordVersion: number | undefined;
}

/** Leases a free worker id (and backups) for `request.node`. */
export async function acquireRecycled(
  context: RegistryContext,
  request: CheckedAcquireRequest,
): Promise<WorkerLease> {
  const { node, maxWorkerId } = request;
  const options = context.options;
  const tree = leafTree(node.name);
  let session: ZkSession;
  try {
    session = await context.openSession(request.signal!);
  } catch (error) {
    if (!isLeafError(error, ErrorCodes.UNAVAILABLE)) throw error;
    throw new LeafError({
      component: COMPONENT,
      code: ErrorCodes.UNAVAILABLE,
      message:
        `${bareMessage(error)}. Recycle mode has no cache ` +
        "fallback: a recyclable id may belong to another node by now",
      details: error.details,
      cause: error,
    });
  }
  const slots: Slot[] = [];
  // The records this start created (ids never used under this name).
  const created: Slot[] = [];
  try {
    await session.ensurePath(tree.recycleWorkers);
    await session.ensurePath(tree.recycleLeases);
    await refuseOtherTrees(session, tree);
    const wanted = 1 + request.backups;
    if (wanted > maxWorkerId + 1) throw exhausted(node, maxWorkerId, wanted, 0);
    const holder = encodeHolder({
      ip: node.ip,
      port: String(node.port),
      workerId: -1,
      pid: process.pid,
      sessionTimeoutMs: session.sessionTimeoutMs,
      since: options.clock.now(),
    });
    let view: PoolView = { held: new Set(), records: new Map() };
    let clock: { now: number; serverNow: number } | undefined;
    for (let round = 0; round < ROUNDS && slots.length < wanted; round++) {
      request.signal?.throwIfAborted();
      view = await readPool(session, tree, maxWorkerId);
      // A requested id (a StatefulSet ordinal) is tried alone, and only while no lease node holds
      // it.
      const requested = request.workerId;
      if (requested !== undefined && view.held.has(requested)) break;
      const ids =
        requested === undefined ? candidates(view, node, maxWorkerId, slots) : [requested];
      for (const workerId of ids) {
        if (slots.length === wanted) break;
        const before = options.clock.now();
        const slot = await tryTake(
          session,
          tree,
          node,
          workerId,
          view.records.get(workerId),
          holder,
        );
        if (!slot) continue;
        if (!view.records.has(workerId)) created.push(slot);
        if (!clock) {
          const stat = await session.exists(slot.leasePath);
          const after = options.clock.now();
          clock = { now: Math.round((before + after) / 2), serverNow: stat?.ctime ?? Date.now() };
        }
        slots.push(slot);
      }
    }
    if (slots.length < wanted && request.workerId !== undefined) {
      throw await inUse(session, tree, node, request.workerId);
    }
    if (slots.length < wanted) {
      const held = [...view.held].filter((id) => id <= maxWorkerId).length;
      throw exhausted(node, maxWorkerId, wanted, held);
    }
    // Checked again now that this start's records exist. A normal-mode start of the name that
    // raced the first check created its forever node either before these records (this read,
    // answered after our own writes, sees it) or after them (its own second check sees ours).
    try {
      await refuseOtherTrees(session, tree);
    } catch (error) {
      // Removed while our lease nodes still hold the ids (nothing was issued under them), so that
      // they do not keep the name from normal mode; closing the session then drops the leases.
      for (const slot of created) {
        await session.remove(slot.recordPath, slot.recordVersion ?? 0).catch(() => undefined);
      }
      throw error;
    }
    if (options.peerClockCheck && clock) {
      const ours = new Set(slots.map((s) => s.workerId));
      const peers: PeerReport[] = [];
      for (const id of view.held) {
        const entry = view.records.get(id);
        // The writer's clock when it sent the write that set mtime (none in a record just created).
        const sample = entry?.record.at ?? 0;
        if (ours.has(id) || !entry || sample === 0) continue;
        peers.push({
          key: `worker ${id} (${entry.record.ip}:${entry.record.port})`,
          timestamp: sample,
          storedAt: entry.stat.mtime,
        });
      }
      checkPeerClocks({ ...clock, peers, ...options.peerClockCheck });
    }
    const primary = slots[0]!;
    checkClockNotBehind({
      component: COMPONENT,
      lastTimestamp: primary.stored,
      now: options.clock.now(),
      toleranceMs: options.clockToleranceMs,
      source: `ZooKeeper record ${primary.recordPath}`,
      workerId: primary.workerId,
    });
    const lease = new RecycledLease(context, node, session, slots);
    // No id before every record holds this holder's horizon.
    await lease.begin();
    context.track(lease);
    return lease;
  } catch (error) {
    // Closing the session removes every lease node taken above.
    await session.close();
    throw error;
  }
}

/** Which ids are leased now, and every record of an id in range. */
async function readPool(session: ZkSession, tree: LeafTree, maxWorkerId: number) {
  const held = new Set(
    ((await session.getChildren(tree.recycleLeases))?.children ?? [])
      .map(Number)
      .filter((id) => Number.isInteger(id)),
  );
  const names = (await session.getChildren(tree.recycleWorkers))?.children ?? [];
  const ids = names
    .filter((name) => /^\d+$/.test(name))
    .map(Number)
    .filter((id) => id <= maxWorkerId);
  const records = new Map<number, PoolEntry>();
  await Promise.all(
    ids.map(async (id) => {
      const path = `${tree.recycleWorkers}/${id}`;
      const current = await session.getData(path);
      if (current)
        records.set(id, { record: decodeRecord(path, current.data, id), stat: current.stat });
    }),
  );
  return { held, records };
}

/**
 * Free ids in the order to try them: the ids this ip:port held last (a restarting node gets its
 * id back), then ids never used, then used ids, least recently reported first, so that an id whose
 * holder just died is reused last.
 */
function candidates(
  view: PoolView,
  node: NodeIdentity,
  maxWorkerId: number,
  taken: readonly Slot[],
): number[] {
  const mine: number[] = [];
  const unused: number[] = [];
  const used: number[] = [];
  const takenIds = new Set(taken.map((s) => s.workerId));
  for (let id = 0; id <= maxWorkerId; id++) {
    if (view.held.has(id) || takenIds.has(id)) continue;
    const entry = view.records.get(id);
    if (!entry) unused.push(id);
    else if (entry.record.ip === node.ip && entry.record.port === String(node.port)) mine.push(id);
    else used.push(id);
  }
  const timestampOf = (id: number) => view.records.get(id)?.record.timestamp ?? 0;
  mine.sort((a, b) => timestampOf(b) - timestampOf(a));
  used.sort((a, b) => timestampOf(a) - timestampOf(b) || a - b);
  return [...mine, ...unused, ...used];
}

/**
 * Takes `workerId` in one transaction: create the ephemeral lease node (fails when held) and
 * create the record, or check it is still at the version read (fails when it changed since).
 * Returns undefined when someone else was faster.
 */
async function tryTake(
  session: ZkSession,
  tree: LeafTree,
  node: NodeIdentity,
  workerId: number,
  entry: PoolEntry | undefined,
  holder: Buffer,
): Promise<Slot | undefined> {
  const leasePath = `${tree.recycleLeases}/${workerId}`;
  const recordPath = `${tree.recycleWorkers}/${workerId}`;
  // A holder that vanished may have issued ids up to its horizon.
  const stored = Math.max(entry?.record.timestamp ?? 0, entry?.record.horizon ?? 0);
  // The record is checked, not rewritten: its modification time then still tells when its
  // timestamp was reported, which the peer clock check relies on.
  const ops: MultiOp[] = [
    { op: "create", path: leasePath, data: holder, mode: "ephemeral" },
    entry
      ? { op: "check", path: recordPath, version: entry.stat.version }
      : {
          op: "create",
          path: recordPath,
          data: encodeRecord({ workerId, timestamp: 0, ip: node.ip, port: String(node.port) }),
          mode: "persistent",
        },
  ];
  try {
    await session.multi(ops);
  } catch (error) {
    const code = zkCode(error);
    if (code === ZkCodes.NODE_EXISTS || code === ZkCodes.BAD_VERSION || code === ZkCodes.NO_NODE) {
      return undefined;
    }
    throw error;
  }
  return {
    workerId,
    leasePath,
    recordPath,
    stored,
    horizon: 0,
    recordVersion: entry ? entry.stat.version : 0,
  };
}

/** A recyclable worker id held through a ZooKeeper session. */
class RecycledLease extends LeaseCore implements TrackedLease {
  #horizonTimer: NodeJS.Timeout | undefined;
  #writingHorizons = false;

  constructor(
    private readonly context: RegistryContext,
    private readonly node: NodeIdentity,
    private readonly session: ZkSession,
    private readonly slots: Slot[],
  ) {
    const [primary, ...backups] = slots;
    super({
      component: COMPONENT,
      workerId: primary!.workerId,
      lastTimestamp: primary!.stored,
      backups: backups.map((s) => ({ workerId: s.workerId, lastTimestamp: s.stored })),
    });
    const onSessionLost = () => this.lose(sessionReason(session), { cause: session.lost.reason });
    if (session.lost.aborted) onSessionLost();
    else session.lost.addEventListener("abort", onSessionLost, { once: true });
    for (const slot of slots) this.watch(slot);
  }

  /**
   * The instant after which no id may be issued under this lease unless the leader answers again
   * (see ZkSession.fenceAt): the send time of the last request the leader answered plus
   * `silenceLimitMs`. (0 once lost or released: LeaseCore.)
   */
  protected override liveFenceAt(): number {
    return this.session.fenceAt;
  }

  /**
   * The horizon every record last stored (see WorkerLease.horizon): the generator issues nothing
   * timestamped past it. The session's `fenceAt` stops the holder on the monotonic clock; this
   * stops it on the wall clock, which the next holder's start is measured in.
   */
  protected override liveHorizon(): number {
    return Math.min(...this.slots.map((s) => s.horizon));
  }

  /**
   * Writes every record's horizon, then rewrites it every third of `silenceLimitMs` (skipped while
   * one write is still in flight). Rejects when the first write fails.
   */
  async begin(): Promise<void> {
    await this.serial(() => this.writeHorizons());
    this.#horizonTimer = setInterval(
      () => {
        if (this.#writingHorizons || this.lost.aborted || this.released) return;
        this.#writingHorizons = true;
        this.serial(() =>
          this.lost.aborted || this.released ? Promise.resolve() : this.writeHorizons(),
        )
          .catch(() => {})
          .finally(() => {
            this.#writingHorizons = false;
          });
      },
      Math.max(20, Math.floor(this.session.silenceLimitMs / 3)),
    );
    this.#horizonTimer.unref();
  }

  protected async store(): Promise<void> {
    await this.writeHorizons();
  }

  /**
   * Raises every record to the highest timestamp known and its horizon to this clock +
   * `silenceLimitMs` (never lowered while held). The horizon is read before the writes are sent:
   * the leader orders each write after that, so it expires the session no earlier than a session
   * timeout later, past the horizon (the margin covers clock differences, as for `fenceAt`).
   */
  private async writeHorizons(): Promise<void> {
    const at = this.context.options.clock.now();
    const horizon = at + this.session.silenceLimitMs;
    for (const slot of this.slots) await this.writeSlot(slot, Math.max(slot.horizon, horizon), at);
  }

  protected async free(finalTimestampMs: number | undefined): Promise<void> {
    if (this.lost.aborted) return;
    clearInterval(this.#horizonTimer);
    this.context.untrack(this);
    let failure: unknown;
    try {
      // A final timestamp covers every id issued: no horizon. Without one, ids may have been issued
      // up to now, never after the release.
      const at = this.context.options.clock.now();
      for (const slot of this.slots) {
        await this.writeSlot(
          slot,
          finalTimestampMs !== undefined ? 0 : Math.min(slot.horizon, at),
          at,
        );
      }
      await this.session.multi(
        this.slots.map((s) => ({ op: "remove", path: s.leasePath, version: -1 })),
      );
    } catch (error) {
      failure = error;
    } finally {
      // Ending the session frees the ids in any case.
      await this.session.close();
    }
    if (failure && finalTimestampMs !== undefined && this.slots[0]!.stored < finalTimestampMs) {
      throw new LeafError({
        component: COMPONENT,
        code: ErrorCodes.UNAVAILABLE,
        message:
          `worker id ${this.workerId} was released, but its final timestamp ${finalTimestampMs} ` +
          `could not be stored (${(failure as Error).message}); the record keeps ${this.slots[0]!.stored}`,
        details: { workerId: this.workerId, stored: this.slots[0]!.stored },
        cause: failure,
      });
    }
  }

  async shutdown(why: string): Promise<void> {
    this.lose(why);
    await this.session.close();
  }

  /**
   * Raises the record to the highest timestamp reported and sets its horizon, in one transaction
   * with a check that the lease node still exists, at the record's version (compare-and-set: never
   * backwards). `at` is this clock when the write was decided (the peer clock check's sample).
   */
  private async writeSlot(slot: Slot, horizon: number, at: number): Promise<void> {
    for (let attempt = 0; attempt < 5; attempt++) {
      if (slot.recordVersion === undefined) await this.reread(slot);
      const target = Math.max(slot.stored, this.highest(slot.workerId));
      const data = encodeRecord({
        workerId: slot.workerId,
        timestamp: target,
        ip: this.node.ip,
        port: String(this.node.port),
        horizon,
        at,
      });
      try {
        await this.session.multi([
          { op: "check", path: slot.leasePath, version: -1 },
          { op: "setData", path: slot.recordPath, data, version: slot.recordVersion! },
        ]);
        slot.recordVersion = slot.recordVersion! + 1;
        slot.stored = target;
        slot.horizon = horizon;
        return;
      } catch (error) {
        const code = zkCode(error);
        if (code !== ZkCodes.BAD_VERSION && code !== ZkCodes.NO_NODE) throw error;
        slot.recordVersion = undefined;
      }
    }
    throw new LeafError({
      component: COMPONENT,
      code: ErrorCodes.UNAVAILABLE,
      message: `worker id ${slot.workerId}: ${slot.recordPath} kept changing under the report; another writer uses it`,
      details: { path: slot.recordPath },
    });
  }

  /** Reads the record again, after making sure the lease node is still this session's. */
  private async reread(slot: Slot): Promise<void> {
    const lease = await this.session.exists(slot.leasePath);
    if (!lease || lease.ephemeralOwner !== this.session.sessionId) {
      throw this.lose(`its lease node ${slot.leasePath} is gone or held by another session`);
    }
    const current = await this.session.getData(slot.recordPath);
    if (!current) throw this.lose(`its record ${slot.recordPath} was deleted`);
    const record = decodeRecord(slot.recordPath, current.data, slot.workerId);
    slot.stored = Math.max(slot.stored, record.timestamp);
    slot.recordVersion = current.stat.version;
  }

  private watch(slot: Slot): void {
    this.session
      .exists(slot.leasePath, (type) => {
        if (this.released || this.lost.aborted) return;
        if (type === "deleted") {
          this.lose(`its lease node ${slot.leasePath} was deleted by another client`);
        } else this.watch(slot);
      })
      .then((stat) => {
        if (!stat && !this.released) this.lose(`its lease node ${slot.leasePath} is gone`);
      })
      .catch(() => {});
  }

  /** The lease is lost: the registry stops tracking it and its session ends. */
  protected override onLost(): void {
    clearInterval(this.#horizonTimer);
    this.context.untrack(this);
    void this.session.close();
  }
}

function sessionReason(session: ZkSession): string {
  const reason = session.lost.reason;
  return reason instanceof Error ? bareMessage(reason) : "the ZooKeeper session was lost";
}

/** Recycle ids would collide with normal-mode ids or the fork's pool of the same name. */
async function refuseOtherTrees(session: ZkSession, tree: LeafTree): Promise<void> {
  for (const [path, what] of [
    [tree.forever, "normal mode (Java Leaf's forever nodes)"],
    [tree.forkInUse, "the Leaf fork's zk_recycle mode"],
  ] as const) {
    if ((await session.getChildren(path))?.children.length) {
      throw new LeafError({
        component: COMPONENT,
        code: ErrorCodes.INVALID_CONFIG,
        message:
          `leaf name ${tree.root.slice("/snowflake/".length)} is used by ${what} (${path} has ` +
          "children): recycled ids would collide with those ids. Use another leaf name for recycle mode",
        details: { key: "mode", path },
      });
    }
  }
}

/**
 * WORKER_ID_IN_USE for a requested id whose lease node another session holds, named from its data.
 */
async function inUse(
  session: ZkSession,
  tree: LeafTree,
  node: NodeIdentity,
  workerId: number,
): Promise<LeafError> {
  const leasePath = `${tree.recycleLeases}/${workerId}`;
  const holder = decodeHolder((await session.getData(leasePath))?.data);
  const named = holder
    ? `${holder.ip}:${holder.port} (pid ${holder.pid}, session timeout ${holder.sessionTimeoutMs} ms)`
    : "another node";
  return new LeafError({
    component: COMPONENT,
    code: ErrorCodes.WORKER_ID_IN_USE,
    message:
      `worker id ${workerId} requested by ${nodeKey(node)} is held by ${named} (${leasePath}); stop ` +
      "that node (a pod with the same StatefulSet ordinal still running?) and start this one again " +
      "once its session has ended",
    details: { workerId, leasePath, holder },
  });
}

function exhausted(
  node: NodeIdentity,
  maxWorkerId: number,
  wanted: number,
  held: number,
): LeafError {
  return new LeafError({
    component: COMPONENT,
    code: ErrorCodes.WORKER_IDS_EXHAUSTED,
    message:
      `no free worker id for ${node.name} ${nodeKey(node)}: ${wanted} wanted, ${held} of the ` +
      `${maxWorkerId + 1} ids 0..${maxWorkerId} are leased by live nodes. Stop nodes that are not ` +
      "needed, ask for fewer backups, or use a layout with more worker bits",
    details: { name: node.name, maxWorkerId, wanted, held },
  });
}
