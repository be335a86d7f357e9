// SIGKILL of one server (a crash), restarted on the same port and data folder after 0.5-4 s. A
// restart refused by a documented check (a worker id still leased, a clock behind) is retried.
import { type Fault, mainServers, NO_ANSWER, processOf } from "./fault";

export const serverKill: Fault = {
  name: "server-kill",
  title: "SIGKILL of one server, restart after 0.5-4 s",
  targets: mainServers,
  resources: (target) => [processOf(target)],
  durationMs: [500, 4000],
  async start(c, _family, target) {
    const server = c.server(target);
    if (!server.running) return false;
    await server.kill();
    return true;
  },
  async stop(c, family, target) {
    await c.startServer(target, family.restartAttempts);
  },
  effects: (family, target) => ({
    effects: [{ servers: [target], codes: [...NO_ANSWER, ...family.storeCodes] }],
    settleMs: family.recoveryMs,
  }),
};
