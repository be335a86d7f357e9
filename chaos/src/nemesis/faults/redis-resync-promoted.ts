// A replica that re-synced from a master restarted from its older snapshot, then promoted, on the
// family whose writes wait for the replica (waitReplicas 1): the master saves a snapshot, A, B and
// C take ranges past the marks at the save, every server's link to Redis is cut (no script may run
// on the restarted master: it would fence the namespace in the marker the replica copies), the
// master is SIGKILLed and started again on its folder (it loads the snapshot), the replica re-syncs
// from it in full (its data rolled back), the master is SIGKILLed again and the replica promoted.
// The replica ran since before the marker's last write, so only its previous replication id tells
// it followed another history (the store README's item 6): the namespace must be fenced until the
// operator lifts the fence by the highest mark. The old master comes back empty as the promoted
// replica's replica, so that writes waiting for one replica go through.
import { rmSync } from "node:fs";
import { join } from "node:path";
import { redisCommand, redisInfoField, redisReplicaInSync } from "@leaf/testkit";
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

/** Whether the promotion of the current run was made from a replica seen re-synced (by cluster). */
const resynced = new WeakMap<Cluster, boolean>();

export const redisResyncPromoted: Fault = {
  name: "redis-resync-promoted",
  title:
    "the Redis master (waitReplicas 1) saves a snapshot, serves 2-6 s more, is restarted from it while every server is cut off; its replica re-syncs from it, the master is killed again and the replica promoted; the operator lifts the fence 3-8 s later",
  // With waitReplicas >= 1 only: there a promotion of a replica that followed the marked master is
  // accepted, and this one must not be.
  targets: (family) =>
    family.redisSegment && family.redisReplica && family.redisWaitReplicas ? ["redis"] : [],
  resources: (_target, family) => redisSegmentResources(family),
  durationMs: [3000, 8000],
  params: (rng) => ({ afterSaveMs: rng.int(2000, 6000) }),
  async start(c, family, _target, params) {
    const labels = mainServers(family);
    // Once per run (the replica is then the store), on a cluster whose servers all serve.
    const set = runningMaster(c, labels);
    if (!set) return false;
    const { master } = set;
    const replica = set.replicas[0]!;
    const tag = family.tags[0]!.tag;
    const saved = await redisCommand(master.port, "SAVE");
    const atSave = await highestMark(c, labels, tag);
    c.note(`the master saved a snapshot (${String(saved)}) with the marks at most ${atSave}`);
    await sleep(Number(params.afterSaveMs));
    await untilMarksPast(c, labels, tag, atSave, 20_000, "the snapshot lacks");

    for (const label of labels) c.proxy(label, "redis").cutOff();
    await master.kill();
    await master.start();
    const [replid, secondOffset] = await Promise.all([
      redisInfoField(master.port, "replication", "master_replid"),
      redisInfoField(master.port, "replication", "second_repl_offset"),
    ]);
    c.note(
      `every server cut off from Redis; the master back from its snapshot (replid ${replid.slice(0, 8)}, second_repl_offset ${secondOffset})`,
    );
    // The master delays a diskless sync by 5 s: a full sync takes 5-7 s here.
    const fullSync = await waitNoted(
      c,
      "the replica to re-sync from the restarted master",
      async () =>
        Number(await redisInfoField(master.port, "stats", "sync_full")) >= 1 &&
        (await redisInfoField(replica.port, "replication", "master_link_status")) === "up",
      30_000,
    );
    const followed = await redisInfoField(replica.port, "replication", "master_replid");
    resynced.set(c, fullSync && followed === replid);
    c.note(
      fullSync
        ? `the replica re-synced in full from it (its replid ${followed.slice(0, 8)})`
        : "the replica did not re-sync: this is an ordinary promotion",
    );

    await master.kill();
    await set.promote(0);
    c.stores.set("redis", replica);
    // The old master back empty, following the promoted replica, before any server reaches it, so
    // that a takeover, accepted or fenced, is written with a replica to wait for.
    rmSync(join(master.dir!, "dump.rdb"), { force: true });
    await master.start();
    await redisCommand(master.port, "REPLICAOF", "127.0.0.1", String(replica.port));
    await waitNoted(
      c,
      "the old master to sync with the promoted replica",
      () => redisReplicaInSync(master.port, replica.port),
      30_000,
    );
    for (const spec of family.servers) c.proxy(spec.label, "redis").retarget(replica.port);
    c.note(
      "master killed again, the replica promoted, the old master its replica (empty, synced), every server's proxy moved to it",
    );
    return true;
  },
  async stop(c, family) {
    const labels = mainServers(family);
    const lifted = await liftFenceByHighestMark(c, family, labels, family.tags[0]!.tag);
    // The store README (item 6): a replica that re-synced from another history is fenced.
    if (resynced.get(c) && !/^lifted the fence/.test(lifted)) {
      c.breaks("fence", `a replica re-synced from the restarted master was promoted unfenced`);
    }
    await holdUntilAllServe(c, labels, c.history.now(), "the fence was lifted");
  },
  effects: (family) => ({
    // The namespace fenced (CORRUPT_DATA) until the lift, the store's codes while Redis is cut off
    // or down and while writes wait for the replica.
    effects: [{ servers: ["*"], codes: [...family.storeCodes, "CORRUPT_DATA"] }],
    settleMs: family.recoveryMs + 2000,
  }),
};
