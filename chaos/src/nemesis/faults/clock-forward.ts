// One server's wall clock stepped forward, small (1-5 s) or large (1 h), and left there: setting it
// back would be a backward step, which clock-back covers. On a family whose registry stalls a
// server ahead of it until its clock is set back (`clockSetBack`: Redis), a step that leaves the
// server more than AHEAD_MS ahead is undone when the fault ends; one that leaves it less stays (the
// server keeps issuing ids dated ahead of the store's clock, up to the registry's cap).
import type { Cluster } from "../cluster";
import type { Family } from "../families";
import { type Fault, mainServers } from "./fault";

export const clockForward: Fault = {
  name: "clock-forward",
  title:
    "one server's wall clock stepped forward 1-5 s (small) or 1 h (large), left there (undone at the end where the registry would stall it until then)",
  targets: mainServers,
  resources: (target) => [`clock:${target}`],
  durationMs: [200, 1000],
  params: (rng) =>
    rng.next() < 0.7 ? { forwardMs: rng.int(1000, 5000) } : { forwardMs: 3_600_000 },
  async start(c, _family, target, params) {
    const clock = c.clocks.get(target)!;
    clock.set(clock.offsetMs + Number(params.forwardMs));
    return true;
  },
  stop: (c, family, target, params) => undoStall(c, family, target, Number(params.forwardMs)),
  effects: (family, target) => ({
    effects: [{ servers: [target], codes: family.clockCodes }],
    settleMs: 2000,
    lasting: true,
  }),
};

/**
 * ms a server's clock may run ahead and still be served by a registry that caps horizons at its
 * own clock + lease (3 s leases, renewed every 0.6 s: about 2.4 s), with a margin.
 */
const AHEAD_MS = 1500;

/**
 * Undoes a forward step of `forwardMs` on `target` when its family's registry would stall it
 * (`clockSetBack`) and the step left it more than AHEAD_MS ahead.
 */
export async function undoStall(
  c: Cluster,
  family: Family,
  target: string,
  forwardMs: number,
): Promise<void> {
  const clock = c.clocks.get(target)!;
  if (family.clockSetBack && clock.offsetMs > AHEAD_MS) clock.set(clock.offsetMs - forwardMs);
}
