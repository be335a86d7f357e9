// A normal-mode start without ZooKeeper, as Java Leaf: the worker id of this package's cache file,
// else of Java Leaf's `workerID.properties`, used only when the clock is past its timestamp.
import { ErrorCodes, LeafError, type NodeIdentity, type WorkerLease } from "@leaf/core";
import {
  bareMessage,
  type CachedLease,
  type CheckedAcquireRequest,
  checkClockNotBehind,
  readLeaseCache,
} from "@leaf/core/adapter";
import { readJavaLeafCache } from "./java-cache";
import { NormalLease, type Slot, writeCacheOrRefuse } from "./normal-lease";
import { exhausted } from "./normal-nodes";
import { COMPONENT, type ResolvedOptions } from "./options";
import { contestedKey, leafTree, nodeKey } from "./paths";
import type { RegistryContext } from "./registry-context";

/**
 * Java Leaf's start without ZooKeeper: the id of the cache file, only when the clock is past its
 * timestamp. Without this package's own cache file, Java Leaf's `workerID.properties` (a node
 * migrating from Java Leaf), checked against the time that file was last written.
 */
export function leaseFromCache(
  context: RegistryContext,
  request: CheckedAcquireRequest,
  cachePath: string | undefined,
  cause: LeafError,
  ownSessions: readonly string[] = [],
): WorkerLease {
  const { node } = request;
  const options = context.options;
  const unusable = (why: string) =>
    new LeafError({
      component: COMPONENT,
      code: ErrorCodes.UNAVAILABLE,
      message: `${bareMessage(cause)}, and ${why}`,
      details: { ...cause.details, cacheFile: cachePath },
      cause,
    });
  if (context.contested.has(contestedKey(node))) {
    throw new LeafError({
      component: COMPONENT,
      code: ErrorCodes.WORKER_ID_IN_USE,
      message:
        `${node.name} ${nodeKey(node)} was found held by another process earlier (its marker in ` +
        `ZooKeeper), and ${bareMessage(cause)}: not ` +
        "started from the cache file, since that process may still issue ids under the id; " +
        "start again once ZooKeeper answers",
      details: { ...cause.details, cacheFile: cachePath },
      cause,
    });
  }
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
  const lease = new NormalLease(context, node, tree, slots, cachePath, ownSessions);
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

export function sameNode(a: NodeIdentity, b: NodeIdentity): boolean {
  return a.name === b.name && a.ip === b.ip && a.port === b.port;
}

export function readCacheQuietly(path: string | undefined): CachedLease | undefined {
  if (!path) return undefined;
  try {
    return readLeaseCache(path, COMPONENT);
  } catch {
    // ZooKeeper answered: a broken cache file is rewritten below.
    return undefined;
  }
}
