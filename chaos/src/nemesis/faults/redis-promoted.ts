// A Redis replica that missed writes promoted, once a run, on the Redis segment store's family:
// the replica's link to the master is cut (it misses the ranges taken from then on) until A, B and
// C each took a range past the highest mark at the cut; the master is SIGKILLed, the replica
// promoted (REPLICAOF NO ONE, as Sentinel does) and every server's proxy moved to it. It holds the
// old master's marker, so the namespace is fenced: every server must refuse it until the operator
// runs `leaf store lift-fence RAISE_BY`, RAISE_BY the highest mark the servers list (every max id
// is then above every id handed out).
import { sleep } from "../cluster";
import { highestMark, operatorCommand, untilAllServe } from "../redis-segment";
import { type Fault, mainServers } from "./fault";
import { LOSS_CODES, redisSegmentResources } from "./redis-restart-empty";

export const redisPromoted: Fault = {
  name: "redis-promoted",
  title:
    "a Redis replica cut off from its master (missing ranges) promoted after the master's SIGKILL, the servers' proxies moved to it; the operator lifts the fence 3-8 s later",
  targets: (family) => (family.redisSegment && family.redisReplica ? ["redis"] : []),
  resources: (_target, family) => redisSegmentResources(family),
  durationMs: [3000, 8000],
  params: (rng) => ({ staleMs: rng.int(2000, 6000) }),
  async start(c, family, _target, params) {
    const set = c.redisSet;
    const labels = mainServers(family);
    // Once per run (the replica is then the master), on a cluster whose servers all serve.
    if (!set || c.store("redis") !== set.master || !set.master.running) return false;
    if (labels.some((label) => !c.server(label).running)) return false;
    const tag = family.tags[0]!.tag;
    await set.waitInSync(10_000).catch(() => undefined);
    const atCut = await highestMark(c, labels, tag);
    set.links[0]!.cutOff();
    c.note(`the replica's link cut: it keeps the ranges up to the marks ${atCut}`);
    await sleep(Number(params.staleMs));
    const deadline = performance.now() + 20_000;
    let behind = labels;
    while (behind.length > 0 && performance.now() < deadline) {
      const marks = await Promise.all(behind.map((label) => highestMark(c, [label], tag)));
      behind = behind.filter((_, i) => marks[i]! <= atCut);
      if (behind.length > 0) await sleep(250);
    }
    c.note(
      behind.length === 0
        ? `A, B, C all took ranges past ${atCut} that the replica misses`
        : `${behind.join(", ")} took no range past ${atCut} within 20 s`,
    );
    await set.master.kill();
    const replica = await set.promote(0);
    c.stores.set("redis", replica);
    for (const spec of family.servers) c.proxy(spec.label, "redis").retarget(replica.port);
    c.note("master killed, the replica promoted, every server's proxy moved to it");
    return true;
  },
  async stop(c, family) {
    const labels = mainServers(family);
    const raiseBy = await highestMark(c, labels, family.tags[0]!.tag);
    c.note(
      `operator: ${await operatorCommand(c, family.redisSegment!, ["lift-fence", raiseBy.toString()])}`,
    );
    const liftedAt = c.history.now();
    const waiting = await untilAllServe(c, labels, liftedAt, 15_000);
    c.note(
      waiting.length === 0
        ? `every server serves again ${((c.history.now() - liftedAt) / 1000).toFixed(1)} s after the fence was lifted`
        : `${waiting.join(", ")} served nothing within 15 s of the lift`,
    );
  },
  effects: (family) => ({
    effects: [{ servers: ["*"], codes: [...family.storeCodes, ...LOSS_CODES] }],
    settleMs: family.recoveryMs + 2000,
  }),
};
