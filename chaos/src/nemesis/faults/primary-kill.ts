// SIGKILL of the primary process of a server with several worker processes (server.workers): its
// workers must stop issuing at once (they exit when the channel to their primary closes), and the
// server is started again after 0.5-4 s on the same port and data folder. A worker still alive
// 5 s after its primary died breaks the promise "workers-exit".

import { type Fault, mainServers, NO_ANSWER, processOf } from "./fault";
import { workerPids } from "./worker-pids";

/** How long the workers of a killed primary may take to be gone. */
const EXIT_WAIT_MS = 5000;

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

export const primaryKill: Fault = {
  name: "primary-kill",
  title:
    "SIGKILL of a server's primary process (server.workers): its workers must exit; restart after 0.5-4 s",
  targets: (family) => (family.workers ? mainServers(family) : []),
  resources: (target) => [processOf(target)],
  durationMs: [500, 4000],
  async start(c, _family, target) {
    const server = c.server(target);
    if (!server.running) return false;
    const pids = await workerPids(c, target);
    await server.kill();
    const until = Date.now() + EXIT_WAIT_MS;
    while (pids.some(alive) && Date.now() < until) {
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    const left = pids.filter(alive);
    if (left.length > 0) {
      c.breaks(
        "workers-exit",
        `${target}: worker process(es) ${left.join(", ")} still alive ${EXIT_WAIT_MS} ms after their primary was SIGKILLed`,
      );
    } else c.note(`${target}: primary SIGKILLed; its ${pids.length} workers exited`);
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
