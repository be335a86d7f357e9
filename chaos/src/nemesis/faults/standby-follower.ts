// A standby takes a held worker id over while the holder's ZooKeeper member is a follower cut off
// from its ensemble (the test kit's isolate(), client port open), 8-15 s; then the member is healed
// and both run side by side (takeover.ts). The cut-off follower answers the holder's reads from its
// copy until it gives up following (syncLimit), while the leader expires the holder's session and
// grants its worker id to the standby on another member: a holder that counts a read as a renewal
// issues past the moment the standby takes the id. Only on a family with an ensemble, and only
// for a holder whose member the standby does not use (server i is on member i mod 3).
import type { Family } from "../families";
import { type Effect, type Fault, mainServers } from "./fault";
import {
  holders,
  spareOf,
  startTakeover,
  stopTakeover,
  takeoverEffects,
  takeoverResources,
} from "./takeover";

const MEMBERS = 3;

/** The ensemble member (index) `label` talks to. */
function memberOf(family: Family, label: string): number {
  return family.servers.findIndex((s) => s.label === label) % MEMBERS;
}

export const standbyFollower: Fault = {
  name: "standby-follower",
  title:
    "a standby asks for a holder's worker id while the holder's ZooKeeper member, a follower, is cut off from its ensemble, 8-15 s; then both run 3 s",
  targets: (family) => {
    if (!family.zkEnsemble) return [];
    const spare = memberOf(family, spareOf(family, "standby"));
    return holders(family, "standby").filter((h) => memberOf(family, h) !== spare);
  },
  resources: (target, family) => [
    ...takeoverResources(family, target, spareOf(family, "standby")),
    "store:zookeeper",
    "quorum",
  ],
  durationMs: [8000, 15_000],
  async start(c, family, target, params) {
    const ensemble = c.ensemble;
    if (!ensemble || ensemble.members.some((m) => !m.running)) return false;
    const leader = await ensemble.leader(5000).catch(() => undefined);
    const member = memberOf(family, target);
    if (leader === undefined || leader === member) {
      c.note(`${target}'s member ${member + 1} is the leader (or none answers): no takeover`);
      return false;
    }
    return startTakeover(c, family, target, spareOf(family, "standby"), "follower-partition", {
      ...params,
      member,
    });
  },
  stop: (c, family, target) =>
    stopTakeover(c, family, target, spareOf(family, "standby"), "follower-partition"),
  effects: (family, target) => {
    const takeover = takeoverEffects(family, target, spareOf(family, "standby"), "cut");
    const everyServer: Effect = { servers: mainServers(family), codes: family.storeCodes };
    return { ...takeover, effects: [...takeover.effects, everyServer] };
  },
};
