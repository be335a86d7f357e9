// Two faults in one (issue 24, item 3): one server's wall clock stepped forward 20 s just after a
// renewal could have stored its horizon, then, 60 ms later, its link to the registry's store cut
// for 2-10 s and healed. Its ids must never be dated past the horizon the store last confirmed.
import type { Family } from "../families";
import type { Fault } from "./fault";
import { splitLink } from "./link-cut";

function leaseLinks(family: Family): string[] {
  const store = family.leaseStore;
  if (!store) return [];
  return family.servers
    .filter((s) => !s.spare && s.links.includes(store))
    .map((s) => `${s.label}~${store}`);
}

export const clockForwardCut: Fault = {
  name: "clock-forward-cut",
  title: "a server's wall clock stepped forward 20 s, then its link to the registry cut for 2-10 s",
  targets: leaseLinks,
  resources: (target) => [`clock:${splitLink(target)[0]}`, `link:${target}`],
  durationMs: [2000, 10_000],
  params: (rng) => ({ forwardMs: rng.pick([5000, 20_000]) }),
  async start(c, _family, target, params) {
    const [label, store] = splitLink(target);
    const clock = c.clocks.get(label)!;
    clock.set(clock.offsetMs + Number(params.forwardMs));
    await new Promise((resolve) => setTimeout(resolve, 60));
    c.proxy(label, store).cutOff();
    return true;
  },
  async stop(c, _family, target) {
    const [label, store] = splitLink(target);
    c.proxy(label, store).heal();
  },
  effects: (family, target) => ({
    effects: [
      { servers: [splitLink(target)[0]], codes: [...family.storeCodes, ...family.clockCodes] },
    ],
    settleMs: family.recoveryMs,
    lasting: true,
  }),
};
