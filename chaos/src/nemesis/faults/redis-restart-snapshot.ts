// The Redis segment store's master restarted from its own older snapshot, on the Redis segment
// store's families: it saves a snapshot (SAVE) into its data folder, the load goes on until A, B
// and C each took a range past the marks at the save, then the master is SIGKILLed and started
// again on the same folder, so it loads the snapshot and lacks those ranges. With replicas, Redis 7
// reports `second_repl_offset` on such a restart as on a promoted replica; the store must still
// fence the namespace (`restarted`: the process started after the marker's last write, the store
// README's item 6), also with waitReplicas >= 1, where a promotion is accepted. Every server must
// refuse the namespace until the operator lifts the fence by the highest mark the servers list.
import { rmSync } from "node:fs";
import { join } from "node:path";
import { redisCommand, redisInfoField } from "@leaf/testkit";
import { sleep } from "../cluster";
import { highestMark, operatorRecovers, runningMaster, untilMarksPast } from "../redis-segment";
import { type Fault, mainServers } from "./fault";
import { redisSegmentResources, restartRedis } from "./redis-restart-empty";

export const redisRestartSnapshot: Fault = {
  name: "redis-restart-snapshot",
  title:
    "the Redis segment store's master saves a snapshot, serves 2-6 s more (ranges the snapshot lacks), is SIGKILLed and restarted on its folder after 1-4 s, loading the snapshot; the operator lifts the fence by the highest mark",
  targets: (family) => (family.redisSegment && family.redisReplica ? ["redis"] : []),
  resources: (_target, family) => redisSegmentResources(family),
  durationMs: [1000, 4000],
  params: (rng) => ({ afterSaveMs: rng.int(2000, 6000) }),
  async start(c, family, _target, params) {
    const labels = mainServers(family);
    // The master with its replica (a promoted replica restarted is `redis-restart-empty`'s case),
    // on a cluster whose servers all serve.
    const set = runningMaster(c, labels);
    if (!set) return false;
    const tag = family.tags[0]!.tag;
    const saved = await redisCommand(set.master.port, "SAVE");
    // Read after the save: every range past it was taken after the snapshot.
    const atSave = await highestMark(c, labels, tag);
    c.note(`the master saved a snapshot (${String(saved)}) with the marks at most ${atSave}`);
    await sleep(Number(params.afterSaveMs));
    await untilMarksPast(c, labels, tag, atSave, 20_000, "the snapshot lacks");
    await set.master.kill();
    return true;
  },
  async stop(c, family) {
    const master = c.store("redis");
    await restartRedis(c, family);
    const offset = await redisInfoField(master.port, "replication", "second_repl_offset");
    c.note(`the master back from its snapshot, second_repl_offset ${offset}`);
    // The kit's Redis runs without persistence: the snapshot goes, so that a later kill of this
    // master (redis-restart-empty) brings it back empty, as that fault says.
    rmSync(join(master.dir!, "dump.rdb"), { force: true });
    await operatorRecovers(c, family, mainServers(family));
  },
  effects: (family) => ({
    // The namespace fenced (CORRUPT_DATA) until the lift, the store's codes while Redis is down.
    effects: [{ servers: ["*"], codes: [...family.storeCodes, "CORRUPT_DATA"] }],
    settleMs: family.recoveryMs + 2000,
  }),
};
