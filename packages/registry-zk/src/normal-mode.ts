// Normal mode, compatible with Java Leaf: one persistent sequential node per ip:port under
// `/snowflake/{name}/forever`, whose sequence number is the worker id for good. Added to what Java
// Leaf does: an ephemeral marker per live ip:port (`temporary`, after Meituan's blog) that keeps a
// second process off the same id and tells which peers are live, the peer clock check, and a cache
// file that is used only after its timestamp check passes (Java Leaf #97).
//
// One live holder per ip:port: the marker is ephemeral, so it lasts exactly as long as the session
// that took it. When the session is lost the lease is not lost (the id belongs to the ip:port): it
// opens a new session at once and takes the marker again, and finding the marker held by another
// process ends the lease (lost, code -4). Meanwhile ids keep flowing, as in Java Leaf (ZooKeeper is
// a weak dependency), unless `stopWithoutSession` is set: then the lease issues only while it holds
// the marker through a session the leader vouches for (`fenceAt`, as recycle mode). A lease started
// from a cache file (ZooKeeper unreachable at start; this package's, else Java Leaf's
// workerID.properties) issues without the marker until it first reaches ZooKeeper, as Java Leaf.
import {
  backoffDelay,
  delay,
  ErrorCodes,
  isLeafError,
  LeafError,
  type NodeIdentity,
  type WorkerLease,
} from "@leaf/core";
import {
  type CachedLease,
  type CheckedAcquireRequest,
  checkClockNotBehind,
  LeaseCore,
  readLeaseCache,
  writeLeaseCache,
} from "@leaf/core/adapter";
import { readJavaLeafCache } from "./java-cache";
import { clockPair } from "./lease-support";
import { COMPONENT, type ResolvedOptions } from "./options";
import {
  decodeEndpoint,
  decodeHolder,
  encodeEndpoint,
  encodeHolder,
  type ForeverChild,
  type LeafTree,
  leafTree,
  nodeKey,
  parseForeverChild,
} from "./paths";
import { checkPeerClocks, type PeerReport } from "./peer-clock";
import type { RegistryContext, TrackedLease } from "./registry-context";
import { ZkCodes, type ZkSession, zkCode } from "./zk-session";

/** One worker id of a lease (the primary or a backup) and its `forever` node. */
interface Slot {
  key: string;
  workerId: number;
  path: string;
  /** Highest timestamp known to be stored in ZooKeeper (or the cache). */
  stored: number;
  /** Version of the `forever` node for compare-and-set writes; undefined: read it first. */
  version: number | undefined;
}

/** Grants `request.node` its fixed worker id (and backups), creating them on first use. */
export async function acquireNormal(
  context: RegistryContext,
  request: CheckedAcquireRequest,
): Promise<WorkerLease> {
  const { node } = request;
  const options = context.options;
  const cachePath = options.cacheFile?.(node);
  let session: ZkSession;
  try {
    session = await context.openSession(request.signal!);
  } catch (error) {
    if (!isLeafError(error, ErrorCodes.UNAVAILABLE)) throw error;
    return leaseFromCache(context, request, cachePath, error);
  }
  try {
    return await acquireFromZookeeper(context, request, session, cachePath);
  } catch (error) {
    await session.close();
    // ZooKeeper stopped answering half-way: the cache is as good a start as a failed connect.
    if (isLeafError(error, ErrorCodes.UNAVAILABLE)) {
      return leaseFromCache(context, request, cachePath, error);
    }
    throw error;
  }
}

async function acquireFromZookeeper(
  context: RegistryContext,
  request: CheckedAcquireRequest,
  session: ZkSession,
  cachePath: string | undefined,
): Promise<WorkerLease> {
  const { node } = request;
  const options = context.options;
  const tree = leafTree(node.name);
  await session.ensurePath(tree.forever);
  await session.ensurePath(tree.temporary);
  await refuseRecycleTree(session, tree);
  const marker = await claimMarker(session, tree, node, options, {
    previousSessions: [],
    wait: true,
    signal: request.signal,
  });
  const listing = await session.getChildren(tree.forever);
  const children = (listing?.children ?? []).map(parseForeverChild).filter((c) => c !== undefined);
  if (options.peerClockCheck) {
    const peers = await readPeers(session, tree, node, children);
    checkPeerClocks({ ...marker.clock, peers, ...options.peerClockCheck });
  }
  const slots: Slot[] = [];
  for (let k = 0; k <= request.backups; k++) {
    const key = nodeKey(node, k);
    const own = lowestFor(children, key);
    slots.push(
      own
        ? await readSlot(session, tree, key, own, request.maxWorkerId, node)
        : await createSlot(session, tree, node, key, listing?.stat.cversion ?? 0, request, options),
    );
  }
  const primary = slots[0]!;
  const cached = readCacheQuietly(cachePath);
  const useCache = cached && sameNode(cached.node, node) && cached.workerId === primary.workerId;
  if (useCache) primary.stored = Math.max(primary.stored, cached.timestamp);
  checkClockNotBehind({
    component: COMPONENT,
    lastTimestamp: primary.stored,
    now: options.clock.now(),
    toleranceMs: options.clockToleranceMs,
    source: `ZooKeeper node ${primary.path}${useCache ? ` and cache file ${cachePath}` : ""}`,
    workerId: primary.workerId,
  });
  await session.setData(marker.path, holderData(node, primary.workerId, session, options), -1);
  const lease = new NormalLease(context, node, tree, slots, cachePath);
  writeCacheOrRefuse(lease, cachePath);
  lease.attach(session, marker.path);
  context.track(lease);
  return lease;
}

/**
 * Java Leaf's start without ZooKeeper: the id of the cache file, only when the clock is past its
 * timestamp. Without this package's own cache file, Java Leaf's `workerID.properties` (a node
 * migrating from Java Leaf), checked against the time that file was last written.
 */
function leaseFromCache(
  context: RegistryContext,
  request: CheckedAcquireRequest,
  cachePath: string | undefined,
  cause: LeafError,
): WorkerLease {
  const { node } = request;
  const options = context.options;
  const unusable = (why: string) =>
    new LeafError({
      component: COMPONENT,
      code: ErrorCodes.UNAVAILABLE,
      message: `${cause.message.replace(/^\[leaf\] \[registry-zk\] /, "")}, and ${why}`,
      details: { ...cause.details, cacheFile: cachePath },
      cause,
    });
  if (!cachePath) throw unusable("the cache file is switched off (cacheFile: false)");
  const cached: (CachedLease & { source?: string; path?: string }) | undefined =
    readLeaseCache(cachePath, COMPONENT) ?? fromJavaLeafCache(options, request);
  if (!cached) {
    const javaPath = options.javaCacheFile?.(node);
    throw unusable(
      `there is no cache file at ${cachePath}${javaPath ? ` nor Java Leaf's at ${javaPath}` : ""} to start from`,
    );
  }
  const source = cached.source ?? `cache file ${cachePath} (ZooKeeper unreachable)`;
  if (cached.registry !== "zk" || !sameNode(cached.node, node)) {
    throw unusable(
      `the cache file ${cachePath} belongs to ${cached.registry} ${cached.node.name} ` +
        `${cached.node.ip}:${cached.node.port}, not to ${node.name} ${nodeKey(node)}`,
    );
  }
  if ((cached.backups?.length ?? 0) < request.backups) {
    throw unusable(
      `the ${cached.source ? "Java Leaf " : ""}cache file ${cached.path ?? cachePath} holds ` +
        `${cached.backups?.length ?? 0} backup id(s), ${request.backups} asked for`,
    );
  }
  const ids = [cached.workerId, ...(cached.backups ?? []).map((b) => b.workerId)];
  const tooHigh = ids.find((id) => id > request.maxWorkerId);
  if (tooHigh !== undefined) throw exhausted(node, tooHigh, request.maxWorkerId);
  checkClockNotBehind({
    component: COMPONENT,
    lastTimestamp: cached.timestamp,
    now: options.clock.now(),
    toleranceMs: options.clockToleranceMs,
    source,
    workerId: cached.workerId,
  });
  const tree = leafTree(node.name);
  const slotOf = (k: number, workerId: number, stored: number): Slot => {
    const key = nodeKey(node, k);
    return {
      key,
      workerId,
      path: `${tree.forever}/${key}-${String(workerId).padStart(10, "0")}`,
      stored,
      version: undefined,
    };
  };
  const slots = [
    slotOf(0, cached.workerId, cached.timestamp),
    ...(cached.backups ?? [])
      .slice(0, request.backups)
      .map((b, i) => slotOf(i + 1, b.workerId, b.lastTimestamp)),
  ];
  const lease = new NormalLease(context, node, tree, slots, cachePath);
  // From Java Leaf's file: this package's own cache takes over at once (with a timestamp).
  if (cached.source) writeCacheOrRefuse(lease, cachePath);
  context.track(lease);
  return lease;
}

/**
 * Java Leaf's `workerID.properties` as a cache entry, or undefined when there is none (or it is
 * switched off). It holds no timestamp and no ip: the timestamp is the file's last write, when
 * Java Leaf last started under that id with ZooKeeper reachable (it issued ids from then on); the
 * node is taken to be the one asking (Java Leaf's folder is per leaf name and port).
 */
function fromJavaLeafCache(
  options: ResolvedOptions,
  request: CheckedAcquireRequest,
): (CachedLease & { source: string; path: string }) | undefined {
  const path = options.javaCacheFile?.(request.node);
  const java = path ? readJavaLeafCache(path) : undefined;
  if (!path || !java) return undefined;
  const { name, ip, port } = request.node;
  return {
    node: { name, ip, port },
    workerId: java.workerId,
    timestamp: java.writtenAt,
    backups: [],
    registry: "zk",
    source: `Java Leaf's cache file ${path} (its last write; ZooKeeper unreachable)`,
    path,
  };
}

/** Writes `lease`'s cache file; a failure is a configuration error naming the path. */
function writeCacheOrRefuse(lease: NormalLease, cachePath: string | undefined): void {
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
class NormalLease extends LeaseCore implements TrackedLease {
  private readonly previousSessions: string[] = [];
  private session: ZkSession | undefined;
  private markerPath: string | undefined;
  /** Whether the lease ever held the marker (a lease from the cache file has not yet). */
  private attached = false;
  private reattaching: Promise<void> | undefined;

  constructor(
    private readonly context: RegistryContext,
    private readonly node: NodeIdentity,
    private readonly tree: LeafTree,
    private readonly slots: Slot[],
    private readonly cachePath: string | undefined,
  ) {
    const [primary, ...backups] = slots;
    super({
      component: COMPONENT,
      workerId: primary!.workerId,
      lastTimestamp: primary!.stored,
      backups: backups.map((s) => ({ workerId: s.workerId, lastTimestamp: s.stored })),
    });
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
    const session = await this.context.openSession(this.context.closed);
    try {
      // A lease from a cache file may meet a tree only Java Leaf wrote: no `temporary` yet.
      await session.ensurePath(this.tree.temporary);
      const marker = await claimMarker(session, this.tree, this.node, options, {
        previousSessions: this.previousSessions,
        wait: false,
        signal: this.context.closed,
      }).catch((error) => {
        if (isLeafError(error, ErrorCodes.WORKER_ID_IN_USE)) {
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

/**
 * Creates the ephemeral marker `temporary/{ip}:{port}`. When another session holds it: a session of
 * this lease's past is cleared away; else, with `wait`, waits for it to expire (a crashed previous
 * process), and otherwise fails with WORKER_ID_IN_USE. Returns its path and the clocks at creation.
 */
async function claimMarker(
  session: ZkSession,
  tree: LeafTree,
  node: NodeIdentity,
  options: ResolvedOptions,
  how: { previousSessions: readonly string[]; wait: boolean; signal: AbortSignal | undefined },
): Promise<{ path: string; clock: { now: number; serverNow: number } }> {
  const path = `${tree.temporary}/${nodeKey(node)}`;
  let waited = false;
  for (;;) {
    try {
      const clock = await clockPair(options.clock, async () => {
        await session.create(path, holderData(node, -1, session, options), "ephemeral");
        const stat = await session.exists(path);
        return stat?.ctime ?? Date.now();
      });
      return { path, clock };
    } catch (error) {
      if (zkCode(error) !== ZkCodes.NODE_EXISTS) throw error;
    }
    const current = await session.getData(path);
    if (!current) continue;
    const owner = current.stat.ephemeralOwner;
    if (owner === session.sessionId || how.previousSessions.includes(owner)) {
      await session.remove(path, current.stat.version).catch((error) => {
        const code = zkCode(error);
        if (code !== ZkCodes.NO_NODE && code !== ZkCodes.BAD_VERSION) throw error;
      });
      continue;
    }
    const holder = decodeHolder(current.data);
    const waitMs =
      options.inUseWaitMs ??
      (typeof holder?.sessionTimeoutMs === "number" ? holder.sessionTimeoutMs : 0) + 1_000;
    if (how.wait && !waited && waitMs > 0) {
      waited = true;
      const deadline = Date.now() + waitMs;
      while (Date.now() < deadline && (await session.exists(path))) {
        await delay(Math.min(200, Math.max(10, deadline - Date.now())), how.signal);
      }
      continue;
    }
    throw new LeafError({
      component: COMPONENT,
      code: ErrorCodes.WORKER_ID_IN_USE,
      message:
        `${node.name} ${nodeKey(node)} is held by another live process: ZooKeeper session ` +
        `0x${owner} holds ${path}${holder?.pid ? ` (pid ${holder.pid}` : " ("}` +
        `${typeof holder?.workerId === "number" && holder.workerId >= 0 ? `, worker id ${holder.workerId}` : ""})` +
        `${how.wait ? ` and did not go within ${waitMs} ms` : ""}; stop that process or give this node another port`,
      details: { path, owner, holder },
    });
  }
}

async function readSlot(
  session: ZkSession,
  tree: LeafTree,
  key: string,
  own: ForeverChild,
  maxWorkerId: number,
  node: NodeIdentity,
): Promise<Slot> {
  if (own.sequence > maxWorkerId) throw exhausted(node, own.sequence, maxWorkerId);
  const path = `${tree.forever}/${own.name}`;
  const current = await session.getData(path);
  if (!current) {
    throw new LeafError({
      component: COMPONENT,
      code: ErrorCodes.UNAVAILABLE,
      message: `${path} was deleted while this node started; try again`,
      details: { path },
    });
  }
  const endpoint = decodeEndpoint(path, current.data);
  return {
    key,
    workerId: own.sequence,
    path,
    stored: endpoint.timestamp,
    version: current.stat.version,
  };
}

/** Java Leaf's first start of an ip:port: a persistent sequential node holding the clock. */
async function createSlot(
  session: ZkSession,
  tree: LeafTree,
  node: NodeIdentity,
  key: string,
  cversion: number,
  request: CheckedAcquireRequest,
  options: ResolvedOptions,
): Promise<Slot> {
  // The next sequence number is at least the parent's child version: refuse before wasting one.
  if (cversion > request.maxWorkerId) throw exhausted(node, cversion, request.maxWorkerId);
  const created = await session.create(
    `${tree.forever}/${key}-`,
    encodeEndpoint(node, options.clock.now()),
    "persistent-sequential",
  );
  const child = parseForeverChild(created.slice(created.lastIndexOf("/") + 1));
  if (!child) {
    throw new LeafError({
      component: COMPONENT,
      code: ErrorCodes.CORRUPT_DATA,
      message: `ZooKeeper created ${created}, which has no sequence number`,
      details: { path: created },
    });
  }
  if (child.sequence > request.maxWorkerId) {
    throw exhausted(node, child.sequence, request.maxWorkerId);
  }
  // A new id was never used: lastTimestamp 0. The first report reads the node (version and the
  // creation timestamp) before writing, so even that one never moves the stored value back.
  return {
    key,
    workerId: child.sequence,
    path: created,
    stored: 0,
    version: undefined,
  };
}

/** The live peers' last reports: `forever` nodes whose ip:port holds a live marker. */
async function readPeers(
  session: ZkSession,
  tree: LeafTree,
  node: NodeIdentity,
  children: readonly ForeverChild[],
): Promise<PeerReport[]> {
  const live = new Set((await session.getChildren(tree.temporary))?.children ?? []);
  live.delete(nodeKey(node));
  const peers = children.filter((c) => live.has(c.key));
  const reports = await Promise.all(
    peers.map(async (peer) => {
      const path = `${tree.forever}/${peer.name}`;
      const current = await session.getData(path);
      if (!current) return undefined;
      try {
        const endpoint = decodeEndpoint(path, current.data);
        return { key: peer.key, timestamp: endpoint.timestamp, storedAt: current.stat.mtime };
      } catch {
        return undefined;
      }
    }),
  );
  return reports.filter((r) => r !== undefined);
}

/** Normal and recycle ids of one leaf name would collide: refuse a name the other mode uses. */
async function refuseRecycleTree(session: ZkSession, tree: LeafTree): Promise<void> {
  const records = await session.getChildren(tree.recycleWorkers);
  const fork = await session.getChildren(tree.forkInUse);
  const used = records?.children.length
    ? tree.recycleWorkers
    : fork?.children.length
      ? tree.forkInUse
      : undefined;
  if (used) {
    throw new LeafError({
      component: COMPONENT,
      code: ErrorCodes.INVALID_CONFIG,
      message:
        `leaf name ${tree.root.slice("/snowflake/".length)} is used in recycle mode (${used} has ` +
        'children): normal-mode ids would collide with its ids. Use mode "recycle" or another leaf name',
      details: { key: "mode", path: used },
    });
  }
}

function lowestFor(children: readonly ForeverChild[], key: string): ForeverChild | undefined {
  let best: ForeverChild | undefined;
  for (const child of children) {
    if (child.key === key && (!best || child.sequence < best.sequence)) best = child;
  }
  return best;
}

function exhausted(node: NodeIdentity, workerId: number, maxWorkerId: number): LeafError {
  return new LeafError({
    component: COMPONENT,
    code: ErrorCodes.WORKER_IDS_EXHAUSTED,
    message:
      `ZooKeeper's worker ids for leaf name ${node.name} are used up: ${nodeKey(node)} would get ` +
      `worker id ${workerId}, but the layout holds 0..${maxWorkerId}. Normal mode never reuses an id ` +
      "(Java Leaf's rule: one forever node per ip:port ever seen). Recover with a new leaf name once " +
      'every node has moved to it, or with mode "recycle", which reuses the ids of nodes that are gone',
    details: { name: node.name, node: nodeKey(node), workerId, maxWorkerId },
  });
}

function holderData(
  node: NodeIdentity,
  workerId: number,
  session: ZkSession,
  options: ResolvedOptions,
): Buffer {
  return encodeHolder({
    ip: node.ip,
    port: String(node.port),
    workerId,
    pid: process.pid,
    sessionTimeoutMs: session.sessionTimeoutMs,
    since: options.clock.now(),
  });
}

function sameNode(a: NodeIdentity, b: NodeIdentity): boolean {
  return a.name === b.name && a.ip === b.ip && a.port === b.port;
}

function readCacheQuietly(path: string | undefined): CachedLease | undefined {
  if (!path) return undefined;
  try {
    return readLeaseCache(path, COMPONENT);
  } catch {
    // ZooKeeper answered: a broken cache file is rewritten below.
    return undefined;
  }
}
