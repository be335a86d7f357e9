// Every database of a residue set down at once, for 2-8 s: the first SIGKILLed, the other
// SIGSTOPped (a dead one refuses at once, a stopped one leaves calls unanswered), then both back.
// The one outage the set does not serve through: the server README documents 503
// (SEGMENTS_EXHAUSTED) once the ranges held run out, and ids again once a database answers.
import type { StoreKind } from "../cluster";
import type { Fault } from "./fault";

/** ["mysql", "postgres"] of "mysql+postgres": the database killed, the one paused. */
function split(target: string): [StoreKind, StoreKind] {
  const [killed, paused] = target.split("+");
  return [killed as StoreKind, paused as StoreKind];
}

export const residueOutage: Fault = {
  name: "residue-outage",
  title:
    "every database of a residue set down at once: one SIGKILLed, the other SIGSTOPped, both back after 2-8 s",
  targets: (family) => {
    const members = family.residue ?? [];
    if (members.length !== 2) return [];
    return [`${members[0]}+${members[1]}`, `${members[1]}+${members[0]}`];
  },
  resources: (target) => split(target).map((store) => `store:${store}`),
  durationMs: [2000, 8000],
  async start(c, _family, target) {
    const [killed, paused] = split(target);
    if (!c.store(killed).running || !c.store(paused).running) return false;
    await c.store(killed).kill();
    c.store(paused).pause();
    return true;
  },
  async stop(c, _family, target) {
    const [killed, paused] = split(target);
    if (c.store(paused).running) c.store(paused).resume();
    if (!c.store(killed).running) {
      await c.store(killed).start();
      await c.storeRestarted(killed);
    }
  },
  effects: (family) => ({
    effects: [{ servers: ["*"], codes: family.storeCodes }],
    settleMs: family.recoveryMs,
  }),
};
