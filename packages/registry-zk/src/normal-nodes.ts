// The ZooKeeper nodes of normal mode: the ephemeral live marker of an ip:port, its persistent
// `forever` nodes (read or created on first use), the live peers' reports, and the refusals.
import { delay, ErrorCodes, isLeafError, LeafError, type NodeIdentity } from "@leaf/core";
import { bareMessage, type CheckedAcquireRequest } from "@leaf/core/adapter";
import { clockPair } from "./lease-support";
import { COMPONENT, type ResolvedOptions } from "./options";
import {
  decodeEndpoint,
  decodeHolder,
  encodeEndpoint,
  encodeHolder,
  type ForeverChild,
  type LeafTree,
  nodeKey,
  parseForeverChild,
} from "./paths";
import type { PeerReport } from "./peer-clock";
import { ZkCodes, zkCode } from "./zk-client";
import type { ZkSession } from "./zk-session";

/** One worker id of a lease (the primary or a backup) and its `forever` node. */
export interface Slot {
  key: string;
  workerId: number;
  path: string;
  /** Highest timestamp known to be stored in ZooKeeper (or the cache). */
  stored: number;
  /** Version of the `forever` node for compare-and-set writes; undefined: read it first. */
  version: number | undefined;
}

/**
 * Creates the ephemeral marker `temporary/{ip}:{port}`. When another session holds it: a session of
 * this lease's past is cleared away; else, with `wait`, waits for it to expire (a crashed previous
 * process), and otherwise fails with WORKER_ID_IN_USE. Returns its path and the clocks at creation.
 */
export async function claimMarker(
  session: ZkSession,
  tree: LeafTree,
  node: NodeIdentity,
  options: ResolvedOptions,
  how: { previousSessions: readonly string[]; wait: boolean; signal: AbortSignal | undefined },
): Promise<{ path: string; clock: { now: number; serverNow: number } }> {
  const path = `${tree.temporary}/${nodeKey(node)}`;
  let waited = false;
  // Another process seen holding the marker (or a marker whose owner could not be read yet): from
  // then on ZooKeeper failing to answer refuses the start as that process's (WORKER_ID_IN_USE),
  // never UNAVAILABLE, which would start this process from its cache file while the other may still
  // issue under the same id. A node restarting after a crash, waiting for its predecessor's marker
  // to go, is refused the same way when ZooKeeper fails it meanwhile: it is started again.
  let seen: { owner: string; holder: ReturnType<typeof decodeHolder> } | undefined;
  try {
    return await claimLoop();
  } catch (error) {
    if (seen === undefined || !isLeafError(error, ErrorCodes.UNAVAILABLE)) throw error;
    throw new LeafError({
      component: COMPONENT,
      code: ErrorCodes.WORKER_ID_IN_USE,
      message:
        `${node.name} ${nodeKey(node)} was held by another process (live, or a crashed one whose ` +
        `session had not expired yet: ZooKeeper session ${seen.owner === "(not read)" ? "(not read)" : `0x${seen.owner}`} held ${path}${seen.holder?.pid ? `, pid ${seen.holder.pid}` : ""}) when ` +
        `ZooKeeper stopped answering (${bareMessage(error)}); ` +
        "not started from the cache file, since that process may still issue ids under the id: " +
        "start again once ZooKeeper answers",
      details: { path, owner: seen.owner, holder: seen.holder },
      cause: error,
    });
  }

  async function claimLoop(): Promise<{ path: string; clock: { now: number; serverNow: number } }> {
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
      // Held by someone: until its owner is read, by someone else as far as this start knows. Only
      // a start: a lease taking its marker again (no wait) may meet its own old session's marker,
      // and a failed read there is ZooKeeper's outage, which the lease rides out, not a refusal.
      if (how.wait) seen ??= { owner: "(not read)", holder: undefined };
      const current = await session.getData(path);
      if (!current) continue;
      const owner = current.stat.ephemeralOwner;
      if (owner === session.sessionId || how.previousSessions.includes(owner)) {
        // This process's own marker (an earlier session's): not another holder.
        if (seen?.owner === "(not read)") seen = undefined;
        await session.remove(path, current.stat.version).catch((error) => {
          const code = zkCode(error);
          if (code !== ZkCodes.NO_NODE && code !== ZkCodes.BAD_VERSION) throw error;
        });
        continue;
      }
      const holder = decodeHolder(current.data);
      seen = { owner, holder };
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
}

export async function readSlot(
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
export async function createSlot(
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
export async function readPeers(
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
export async function refuseRecycleTree(session: ZkSession, tree: LeafTree): Promise<void> {
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

export function lowestFor(
  children: readonly ForeverChild[],
  key: string,
): ForeverChild | undefined {
  let best: ForeverChild | undefined;
  for (const child of children) {
    if (child.key === key && (!best || child.sequence < best.sequence)) best = child;
  }
  return best;
}

export function exhausted(node: NodeIdentity, workerId: number, maxWorkerId: number): LeafError {
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

export function holderData(
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
