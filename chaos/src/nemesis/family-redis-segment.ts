// The Redis segment store's families: A, B, C on one namespace of a Redis master with a replica (no
// persistence), each through its proxy; `segment-redis` with waitReplicas 0, `segment-redis-wait`
// with 1 (every write waits for the replica, so a promotion is accepted, not fenced). The store is
// restarted only by its own faults, which end with the operator's steps the store needs after a
// loss (redis-restart-empty.ts: the namespace created again and the tag above every id handed out;
// redis-promoted.ts, redis-restart-snapshot.ts: the fence lifted).
import { adminOn, serverConfig, snowflakeOff } from "../server-configs";
import type { Cluster, ServerSpec } from "./cluster";
import { type Family, httpClients, NAME, segmentPoolClients } from "./families";
import { segmentOnRedis } from "./redis-segment";

/** The family whose writes wait for `waitReplicas` replicas (0: `segment-redis`). */
export function segmentRedisFamily(waitReplicas = 0): Family {
  const tag = "nem";
  const labels = ["A", "B", "C"];
  const servers: ServerSpec[] = labels.map((label) => ({
    label,
    links: ["redis"],
    config: (c: Cluster) =>
      serverConfig(
        NAME,
        segmentOnRedis(c.urlOf(label, "redis"), NAME, waitReplicas),
        snowflakeOff(),
        adminOn(),
      ),
  }));
  const space = `segment:${tag}`;
  return {
    name: waitReplicas === 0 ? "segment-redis" : "segment-redis-wait",
    title: `segment: A, B, C on the Redis segment store (namespace nem, tag nem, step 500, waitReplicas ${waitReplicas}), a Redis master with a replica, no persistence`,
    stores: ["redis"],
    tags: [{ tag, step: 500 }],
    servers,
    clients: [
      ...labels.flatMap((label) => httpClients(label, "segment", space, true, { tag })),
      ...segmentPoolClients(labels, tag, space),
    ],
    storeCodes: ["SEGMENTS_EXHAUSTED", "NOT_INITIALIZED"],
    clockCodes: [],
    recoveryMs: 5000,
    redisReplica: true,
    redisSegment: NAME,
    redisWaitReplicas: waitReplicas,
    ownStoreRestart: true,
    restartAttempts: 2,
  };
}
