// SIGTERM of one server (a graceful stop: it drains, gives unused segment ids back, releases its
// lease), restarted after 0.5-4 s.
import { type Fault, mainServers, NO_ANSWER, processOf } from "./fault";

export const serverTerm: Fault = {
  name: "server-term",
  title: "SIGTERM of one server, restart after 0.5-4 s",
  targets: mainServers,
  resources: (target) => [processOf(target)],
  durationMs: [500, 4000],
  async start(c, _family, target) {
    const server = c.server(target);
    if (!server.running) return false;
    // Not awaited: the drain takes up to server.drainMs while the fault is active.
    void server.stop();
    return true;
  },
  async stop(c, family, target) {
    const server = c.server(target);
    if (server.running) await server.stop();
    await c.startServer(target, family.restartAttempts);
  },
  effects: (family, target) => ({
    effects: [
      {
        servers: [target],
        codes: [...NO_ANSWER, "SHUTTING_DOWN", "CLOSED", ...family.storeCodes],
      },
    ],
    settleMs: family.recoveryMs,
  }),
};
