// One server's wall clock stepped forward, small (1-5 s) or large (1 h), and left there: setting it
// back would be a backward step, which clock-back covers.
import { type Fault, mainServers } from "./fault";

export const clockForward: Fault = {
  name: "clock-forward",
  title: "one server's wall clock stepped forward 1-5 s (small) or 1 h (large), left there",
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
  async stop() {},
  effects: (family, target) => ({
    effects: [{ servers: [target], codes: family.clockCodes }],
    settleMs: 2000,
    lasting: true,
  }),
};
