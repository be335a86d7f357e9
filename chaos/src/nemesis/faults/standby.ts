// One more server than there are free worker ids, started for 3-12 s on a leased registry: its start
// is refused (WORKER_IDS_EXHAUSTED, exit 1) while every id is held, and it takes an id the moment a
// holder's lease lapses (a holder cut off, paused, or killed): the takeover a fenced holder must
// have stopped issuing before.
import { type Fault, NO_ANSWER } from "./fault";

export const standby: Fault = {
  name: "standby",
  title:
    "a standby server started on a leased registry for 3-12 s (a takeover when a lease lapses)",
  targets: (family) => family.servers.filter((s) => s.spare === "standby").map((s) => s.label),
  resources: (target) => [`process:${target}`],
  durationMs: [3000, 12_000],
  async start(c, _family, target) {
    await c.startServer(target, 1);
    return true;
  },
  async stop(c, _family, target) {
    const server = c.server(target);
    if (server.running) await server.kill();
  },
  effects: (family, target) => ({
    effects: [{ servers: [target], codes: [...NO_ANSWER, ...family.storeCodes] }],
    settleMs: 1000,
  }),
};
