// A ZooKeeper follower partitioned from the rest of its ensemble (the test kit's isolate(): every
// quorum link to and from it cut, client ports still open), healed after 3-12 s. The servers on
// that member still reach it, and it answers reads from its copy until it gives up following
// (syncLimit): a holder that counts such an answer as a renewal keeps issuing after the leader's
// side expired its session and granted its worker id to another server. Only on a family with an
// ensemble.
import type { Fault } from "./fault";

export const zkFollowerPartition: Fault = {
  name: "zk-follower-partition",
  title: "a ZooKeeper follower cut off from its ensemble (client port open), healed after 3-12 s",
  targets: (family) => (family.zkEnsemble ? ["zookeeper"] : []),
  resources: () => ["store:zookeeper", "quorum"],
  durationMs: [3000, 12_000],
  params: (rng) => ({ member: rng.int(0, 2) }),
  async start(c, _family, _target, params) {
    const ensemble = c.ensemble;
    if (!ensemble || ensemble.members.some((m) => !m.running)) return false;
    const leader = await ensemble.leader(5000).catch(() => undefined);
    if (leader === undefined) return false;
    let member = Number(params.member);
    if (member === leader) member = (member + 1) % ensemble.members.length;
    ensemble.isolate(member);
    c.note(
      `ZooKeeper member ${member + 1} (a follower; leader ${leader + 1}) cut off from the ensemble`,
    );
    return true;
  },
  async stop(c) {
    c.ensemble?.heal();
  },
  effects: (family) => ({
    effects: [{ servers: ["*"], codes: family.storeCodes }],
    settleMs: family.recoveryMs,
  }),
};
