// The marker's own Redis process given older data, once a run, on the Redis segment store's
// families (the store README's item 2, `resynced`): the replica is made to lack the last ranges,
// the master is made its replica (a full re-sync replaces the master's data, the marker's copy
// with it) and a master again, so its run id is still the one the marker names. With waitReplicas
// 0 the replica's link is cut while A, B and C take ranges past the marks at the cut; with 1 every
// write waits for the replica (cut off, it misses none), so it saves a snapshot, ranges are taken
// past the marks at the save (each acknowledged by it), and it is cut off, SIGKILLed and started
// again from the snapshot. Every server's link to Redis is cut from then on (no script may run
// before the master is a master again); the master is made one with CONFIG RESETSTAT (the bytes
// read from a master back to 0) or not, its backlog freed (repl-backlog-ttl: a new replication id,
// no sign of a promotion left) or kept. The namespace must be fenced until the operator lifts the
// fence by the highest mark the servers list.
import { rmSync } from "node:fs";
import { join } from "node:path";
import { storeKeys } from "@leaf/segment-redis";
import { redisCommand, redisInfoField } from "@leaf/testkit";
import { type Cluster, sleep } from "../cluster";
import {
  highestMark,
  holdUntilAllServe,
  liftFenceByHighestMark,
  runningMaster,
  untilMarksPast,
  waitNoted,
} from "../redis-segment";
import { type Fault, mainServers } from "./fault";
import { redisSegmentResources } from "./redis-restart-empty";

/** Runs this fault was applied in: once a run, its two full syncs take half a family's minute. */
const applied = new WeakSet<Cluster>();
/** Whether the master of the run was seen re-synced with the replica's older data. */
const resynced = new WeakMap<Cluster, boolean>();

/** The Redis keys of the family's namespace (the store's default key prefix). */
const keysOf = (namespace: string) => storeKeys(namespace, "leaf:segment:");

/** The max id of the tag at `key` on the Redis at `port`; undefined when it has none or is down. */
async function maxIdOn(port: number, key: string): Promise<bigint | undefined> {
  const value = await redisCommand(port, "HGET", key, "max_id");
  return typeof value === "string" ? BigInt(value) : undefined;
}

export const redisMasterResynced: Fault = {
  name: "redis-master-resynced",
  title:
    "the Redis master made a replica of its replica, which lacks ranges (cut off 2-6 s, or restarted from its snapshot), re-synced in full and made a master again, with or without CONFIG RESETSTAT and its backlog freed, while every server is cut off; the operator lifts the fence 3-8 s later",
  targets: (family) => (family.redisSegment && family.redisReplica ? ["redis"] : []),
  resources: (_target, family) => redisSegmentResources(family),
  durationMs: [3000, 8000],
  params: (rng) => ({
    staleMs: rng.int(2000, 6000),
    resetStat: rng.pick(["yes", "no"]),
    backlog: rng.pick(["freed", "kept"]),
  }),
  async start(c, family, _target, params) {
    const labels = mainServers(family);
    // The master with its replica, on a cluster whose servers all serve; once a run.
    const set = runningMaster(c, labels);
    if (!set || applied.has(c)) return false;
    applied.add(c);
    const { master } = set;
    const replica = set.replicas[0]!;
    const link = set.links[0]!;
    const tag = family.tags[0]!.tag;
    const tagKey = keysOf(family.redisSegment!).tag(tag);
    await set.waitInSync(10_000).catch(() => undefined);
    if (family.redisWaitReplicas) {
      const saved = await redisCommand(replica.port, "SAVE");
      const atSave = await highestMark(c, labels, tag);
      c.note(`the replica saved a snapshot (${String(saved)}) with the marks at most ${atSave}`);
      await sleep(Number(params.staleMs));
      await untilMarksPast(c, labels, tag, atSave, 20_000, "the replica's snapshot lacks");
      link.cutOff();
      await replica.kill();
      await replica.start();
      // The kit's Redis has no persistence: a later restart of the replica comes back empty.
      rmSync(join(replica.dir!, "dump.rdb"), { force: true });
      c.note("the replica's link cut, the replica SIGKILLed and started again from its snapshot");
    } else {
      const atCut = await highestMark(c, labels, tag);
      link.cutOff();
      c.note(`the replica's link cut: it keeps the ranges up to the marks ${atCut}`);
      await sleep(Number(params.staleMs));
      await untilMarksPast(c, labels, tag, atCut, 20_000, "the replica misses");
    }

    for (const label of labels) c.proxy(label, "redis").cutOff();
    const newer = await maxIdOn(master.port, tagKey);
    await redisCommand(replica.port, "REPLICAOF", "NO", "ONE");
    const older = await maxIdOn(replica.port, tagKey);
    await redisCommand(master.port, "REPLICAOF", "127.0.0.1", String(replica.port));
    // The replica, a master now, delays a diskless sync by 5 s: a full sync takes 5-7 s here.
    const synced = await waitNoted(
      c,
      "the master to re-sync from the replica",
      async () =>
        (await redisInfoField(master.port, "replication", "master_link_status")) === "up" &&
        (await maxIdOn(master.port, tagKey)) === older,
      30_000,
    );
    resynced.set(c, synced && older !== undefined && newer !== undefined && older < newer);
    c.note(
      `every server cut off from Redis; the replica made a master, the master its replica: ${synced ? "re-synced" : "not re-synced"} (max id ${newer} -> ${await maxIdOn(master.port, tagKey)}, the replica's ${older})`,
    );

    await redisCommand(master.port, "REPLICAOF", "NO", "ONE");
    if (params.resetStat === "yes") await redisCommand(master.port, "CONFIG", "RESETSTAT");
    if (params.backlog === "freed") {
      // Without replicas for repl-backlog-ttl a master frees its backlog and takes a new
      // replication id, with no link to the one it had (nothing tells a promotion then).
      await redisCommand(master.port, "CONFIG", "SET", "repl-backlog-ttl", "1");
      await waitNoted(
        c,
        "the master's backlog to be freed",
        async () =>
          (await redisInfoField(master.port, "replication", "repl_backlog_active")) === "0",
        20_000,
      );
      await redisCommand(master.port, "CONFIG", "SET", "repl-backlog-ttl", "3600");
    }
    const [secondOffset, input] = await Promise.all([
      redisInfoField(master.port, "replication", "second_repl_offset"),
      redisInfoField(master.port, "stats", "total_net_repl_input_bytes"),
    ]);
    c.note(
      `the master made a master again (CONFIG RESETSTAT: ${params.resetStat}, backlog ${params.backlog}): second_repl_offset ${secondOffset}, total_net_repl_input_bytes ${input}`,
    );

    link.heal();
    await redisCommand(replica.port, "REPLICAOF", "127.0.0.1", String(link.port));
    // With waitReplicas every write waits for the replica: the servers are let in once it follows.
    await set
      .waitInSync(30_000)
      .catch(() => c.note("the replica not in sync with the master 30 s after"));
    for (const label of labels) c.proxy(label, "redis").heal();
    c.note("the replica follows the master again; every server's link healed");
    return true;
  },
  async stop(c, family) {
    const labels = mainServers(family);
    const master = c.store("redis");
    const marker = keysOf(family.redisSegment!).marker;
    // The servers' first calls after the heal fence the namespace; the operator lifts what is there.
    await waitNoted(
      c,
      "the namespace to be fenced",
      async () => ((await redisCommand(master.port, "HGET", marker, "fence_reason")) ?? "") !== "",
      10_000,
    );
    const lifted = await liftFenceByHighestMark(c, family, labels, family.tags[0]!.tag);
    // The store README (item 2): the marker's own process that was a replica since is fenced.
    if (resynced.get(c) && !/^lifted the fence/.test(lifted)) {
      c.breaks("fence", "the marker's own Redis re-synced with older data served unfenced");
    }
    await holdUntilAllServe(c, labels, c.history.now(), "the fence was lifted");
  },
  effects: (family) => ({
    // The namespace fenced (CORRUPT_DATA) until the lift, the store's codes while Redis is cut off
    // and while writes wait for the cut-off replica.
    effects: [{ servers: ["*"], codes: [...family.storeCodes, "CORRUPT_DATA"] }],
    settleMs: family.recoveryMs + 2000,
  }),
};
