// A Redis replica that missed writes promoted, once a run, on the Redis segment store's family:
// the replica's link to the master is cut (it misses the ranges taken from then on) until A, B and
// C each took a range past the highest mark at the cut; the master is SIGKILLed, the replica
// promoted (REPLICAOF NO ONE, as Sentinel does) and every server's proxy moved to it. It holds the
// old master's marker, so the namespace is fenced: every server must refuse it until the operator
// runs `leaf store lift-fence RAISE_BY`, RAISE_BY the highest mark the servers list (every max id
// is then above every id handed out).
import { sleep } from "../cluster";
import {
  highestMark,
  holdUntilAllServe,
  liftFenceByHighestMark,
  runningMaster,
  untilMarksPast,
} from "../redis-segment";
import { type Fault, mainServers } from "./fault";
import { LOSS_CODES, redisSegmentResources } from "./redis-restart-empty";

export const redisPromoted: Fault = {
  name: "redis-promoted",
  title:
    "a Redis replica cut off from its master (missing ranges) promoted after the master's SIGKILL, the servers' proxies moved to it; the operator lifts the fence 3-8 s later",
  // Not with waitReplicas >= 1: writes wait for the cut-off replica, so it misses none, and once
  // promoted it has no replica left, so every later write would wait in vain.
  targets: (family) =>
    family.redisSegment && family.redisReplica && !family.redisWaitReplicas ? ["redis"] : [],
  resources: (_target, family) => redisSegmentResources(family),
  durationMs: [3000, 8000],
  params: (rng) => ({ staleMs: rng.int(2000, 6000) }),
  async start(c, family, _target, params) {
    const labels = mainServers(family);
    // Once per run (the replica is then the master), on a cluster whose servers all serve.
    const set = runningMaster(c, labels);
    if (!set) return false;
    const tag = family.tags[0]!.tag;
    await set.waitInSync(10_000).catch(() => undefined);
    const atCut = await highestMark(c, labels, tag);
    set.links[0]!.cutOff();
    c.note(`the replica's link cut: it keeps the ranges up to the marks ${atCut}`);
    await sleep(Number(params.staleMs));
    await untilMarksPast(c, labels, tag, atCut, 20_000, "the replica misses");
    await set.master.kill();
    const replica = await set.promote(0);
    c.stores.set("redis", replica);
    for (const spec of family.servers) c.proxy(spec.label, "redis").retarget(replica.port);
    c.note("master killed, the replica promoted, every server's proxy moved to it");
    return true;
  },
  async stop(c, family) {
    const labels = mainServers(family);
    await liftFenceByHighestMark(c, family, labels, family.tags[0]!.tag);
    await holdUntilAllServe(c, labels, c.history.now(), "the fence was lifted");
  },
  effects: (family) => ({
    effects: [{ servers: ["*"], codes: [...family.storeCodes, ...LOSS_CODES] }],
    settleMs: family.recoveryMs + 2000,
  }),
};
