// One server's wall clock stepped back (libfaketime's control file; monotonic time untouched),
// small (5 ms to 1.5 s) or large (1 h), and set right again after 1-6 s.
import { type Fault, mainServers } from "./fault";

const HOUR_MS = 3_600_000;

/** The offset each server's clock had before the step, to restore. */
const before = new Map<string, number>();

export const clockBack: Fault = {
  name: "clock-back",
  title:
    "one server's wall clock stepped back 5 ms-1.5 s (small) or 1 h (large), restored after 1-6 s",
  targets: mainServers,
  resources: (target) => [`clock:${target}`],
  durationMs: [1000, 6000],
  params: (rng) => (rng.next() < 0.7 ? { backMs: rng.int(5, 1500) } : { backMs: HOUR_MS }),
  async start(c, _family, target, params) {
    const clock = c.clocks.get(target)!;
    before.set(target, clock.offsetMs);
    clock.set(clock.offsetMs - Number(params.backMs));
    return true;
  },
  async stop(c, _family, target) {
    c.clocks.get(target)!.set(before.get(target) ?? 0);
  },
  // Setting the clock right again is a forward step of backMs: past the horizon its last report
  // stored (while stepped back, or with the store away meanwhile), the server answers LEASE_LOST
  // until a report stores the restored clock, as after clock-forward: the family's recovery time.
  effects: (family, target) => ({
    effects: [{ servers: [target], codes: family.clockCodes }],
    settleMs: Math.max(2000, family.recoveryMs),
  }),
};
