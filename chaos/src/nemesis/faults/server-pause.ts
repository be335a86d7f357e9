// SIGSTOP of one server for a while, then SIGCONT: requests queue in its sockets; a leased worker
// id may lapse meanwhile, so on waking it must fence before it issues again.
import { type Fault, mainServers, NO_ANSWER, processOf } from "./fault";

export const serverPause: Fault = {
  name: "server-pause",
  title: "SIGSTOP of one server, SIGCONT after 0.5-8 s",
  targets: mainServers,
  resources: (target) => [processOf(target)],
  durationMs: [500, 8000],
  async start(c, _family, target) {
    const server = c.server(target);
    if (!server.running) return false;
    server.pause();
    return true;
  },
  async stop(c, _family, target) {
    const server = c.server(target);
    if (server.running) server.resume();
  },
  effects: (family, target) => ({
    effects: [{ servers: [target], codes: [...NO_ANSWER, ...family.storeCodes] }],
    settleMs: family.recoveryMs,
  }),
};
