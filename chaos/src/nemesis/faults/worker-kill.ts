// SIGKILL of one worker process of a server with several (server.workers): its primary starts it
// again after its exit, as the same node to the registry; the server's other workers answer
// meanwhile. Stops once the worker serves again.
import { type Fault, mainServers, NO_ANSWER, processOf } from "./fault";
import { actedOn, drawWorker, workerPid, workerServingAgain } from "./worker-pids";

export const workerKill: Fault = {
  name: "worker-kill",
  title: "SIGKILL of one worker process of a server (server.workers), started again by its primary",
  targets: (family) => (family.workers ? mainServers(family) : []),
  resources: (target) => [processOf(target)],
  durationMs: [1000, 5000],
  params: drawWorker,
  async start(c, _family, target, params) {
    const pid = await workerPid(c, target, params);
    if (pid === undefined) return false;
    process.kill(pid, "SIGKILL");
    c.note(`${target}: worker ${params.worker} (pid ${pid}) SIGKILLed`);
    actedOn.set(target, pid);
    return true;
  },
  stop: (c, _family, target, params) => workerServingAgain(c, target, params),
  effects: (family, target) => ({
    effects: [{ servers: [target], codes: [...NO_ANSWER, ...family.storeCodes] }],
    settleMs: family.recoveryMs,
  }),
};
