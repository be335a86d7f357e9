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
import { ErrorCodes, isLeafError, type WorkerLease } from "@leaf/core";
import { type CheckedAcquireRequest, checkClockNotBehind } from "@leaf/core/adapter";
import { leaseFromCache, readCacheQuietly, sameNode } from "./normal-cache-start";
import { NormalLease, type Slot, writeCacheOrRefuse } from "./normal-lease";
import {
  claimMarker,
  createSlot,
  holderData,
  lowestFor,
  readPeers,
  readSlot,
  refuseRecycleTree,
} from "./normal-nodes";
import { COMPONENT } from "./options";
import { checkJavaLeafName, contestedKey, leafTree, nodeKey, parseForeverChild } from "./paths";
import { checkPeerClocks } from "./peer-clock";
import type { RegistryContext } from "./registry-context";
import type { ZkSession } from "./zk-session";

/** Grants `request.node` its fixed worker id (and backups), creating them on first use. */
export async function acquireNormal(
  context: RegistryContext,
  request: CheckedAcquireRequest,
): Promise<WorkerLease> {
  const { node } = request;
  checkJavaLeafName(node.name, "node.name");
  const options = context.options;
  const cachePath = options.cacheFile?.(node);
  const contestKey = contestedKey(node);
  let session: ZkSession;
  try {
    session = await context.openSession(request.signal!);
  } catch (error) {
    if (!isLeafError(error, ErrorCodes.UNAVAILABLE)) throw error;
    return leaseFromCache(context, request, cachePath, error);
  }
  try {
    const lease = await acquireFromZookeeper(context, request, session, cachePath);
    context.contested.delete(contestKey);
    return lease;
  } catch (error) {
    await session.close();
    if (isLeafError(error, ErrorCodes.WORKER_ID_IN_USE)) context.contested.add(contestKey);
    // ZooKeeper stopped answering half-way: the cache is as good a start as a failed connect. The
    // marker this session may have taken is this process's own when the lease next reaches
    // ZooKeeper (it goes with the session), not another process's.
    if (isLeafError(error, ErrorCodes.UNAVAILABLE)) {
      return leaseFromCache(context, request, cachePath, error, [session.sessionId]);
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
  const created: Slot[] = [];
  for (let k = 0; k <= request.backups; k++) {
    const key = nodeKey(node, k);
    const own = lowestFor(children, key);
    if (own) {
      slots.push(await readSlot(session, tree, key, own, request.maxWorkerId, node));
    } else {
      const slot = await createSlot(
        session,
        tree,
        node,
        key,
        listing?.stat.cversion ?? 0,
        request,
        options,
      );
      slots.push(slot);
      created.push(slot);
    }
  }
  // Checked again now that this node's forever nodes exist. A recycle-mode start of the name that
  // raced the first check wrote its record either before these nodes (this read, answered after
  // our own writes, sees it) or after them (its own second check sees ours): never both granted.
  try {
    await refuseRecycleTree(session, tree);
  } catch (error) {
    // Nothing was issued under the new nodes: removed, they leave the name to recycle mode.
    for (const slot of created) await session.remove(slot.path, -1).catch(() => undefined);
    throw error;
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
