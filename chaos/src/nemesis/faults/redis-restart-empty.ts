// The Redis segment store's Redis SIGKILLed and restarted without persistence, on the family of
// that store: back empty (the marker gone), or, for a promoted replica, from the snapshot of its
// last full sync (older writes: the namespace fenced as `restarted`). Every server must refuse the
// namespace and hand out nothing until the operator acts, as the store's README says: `leaf store
// create-namespace` and the tag created again (the admin API) at the highest high-water mark the
// servers list, or, when the namespace still exists, `leaf store lift-fence RAISE_BY` with that
// mark. Held while every server runs, so that every node's mark is read.
import { redisReplicaInSync, waitUntil } from "@leaf/testkit";
import type { Cluster } from "../cluster";
import type { Family } from "../families";
import { operatorRecovers } from "../redis-segment";
import { type Fault, mainServers } from "./fault";

/** The codes of a namespace lost or fenced (the store README), and of the tag not created yet. */
export const LOSS_CODES = ["CORRUPT_DATA", "UNKNOWN_TAG"];

/** What a Redis segment fault holds: the store, and every server's process and link. */
export function redisSegmentResources(family: Family): string[] {
  return [
    "store:redis",
    ...family.servers.flatMap((s) => [`process:${s.label}`, `link:${s.label}~redis`]),
  ];
}

/**
 * Starts the family's Redis again when it is down (a promoted replica made a master again). With
 * waitReplicas, waits (at most 20 s) until its replica synced with it again (a full sync, after
 * the 5 s diskless-sync delay): the set's replica, or, for a promoted replica, the old master that
 * follows it (redis-resync-promoted). Until then every write, the operator's too, is refused as
 * not replicated.
 */
export async function restartRedis(c: Cluster, family: Family): Promise<void> {
  const store = c.store("redis");
  if (!store.running) {
    await store.start();
    await c.storeRestarted("redis");
  }
  const set = c.redisSet;
  if (!family.redisWaitReplicas || !set) return;
  const synced =
    store === set.master
      ? set.waitInSync(20_000)
      : waitUntil(
          "the old master to follow the promoted replica again",
          () => redisReplicaInSync(set.master.port, store.port),
          20_000,
        );
  await synced.catch(() => c.note("the replica not in sync 20 s after the restart"));
}

export const redisRestartEmpty: Fault = {
  name: "redis-restart-empty",
  title:
    "the Redis segment store's Redis SIGKILLed, restarted without persistence after 1-6 s (empty, or a promoted replica from its last sync's snapshot); the operator creates the namespace and the tag again at the highest mark, or lifts the fence by it",
  targets: (family) => (family.redisSegment ? ["redis"] : []),
  resources: (_target, family) => redisSegmentResources(family),
  durationMs: [1000, 6000],
  async start(c, family) {
    const store = c.store("redis");
    if (!store.running) return false;
    if (mainServers(family).some((label) => !c.server(label).running)) return false;
    await store.kill();
    return true;
  },
  async stop(c, family) {
    await restartRedis(c, family);
    c.note("Redis back without its writes: the servers must refuse the namespace");
    await operatorRecovers(c, family, mainServers(family));
  },
  effects: (family) => ({
    effects: [{ servers: ["*"], codes: [...family.storeCodes, ...LOSS_CODES] }],
    // The tag list is re-read every 2 s: the other servers find the tag on the next read.
    settleMs: family.recoveryMs + 2000,
  }),
};
