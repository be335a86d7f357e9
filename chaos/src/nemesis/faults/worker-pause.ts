// SIGSTOP of one worker process of a server with several (server.workers), SIGCONT after 0.5-8 s:
// requests queue in its sockets, the server answers not ready meanwhile; its siblings serve.
import { type Fault, mainServers, NO_ANSWER, processOf } from "./fault";
import { actedOn, drawWorker, workerPid } from "./worker-pids";

export const workerPause: Fault = {
  name: "worker-pause",
  title: "SIGSTOP of one worker process of a server (server.workers), SIGCONT after 0.5-8 s",
  targets: (family) => (family.workers ? mainServers(family) : []),
  resources: (target) => [processOf(target)],
  durationMs: [500, 8000],
  params: drawWorker,
  async start(c, _family, target, params) {
    const pid = await workerPid(c, target, params);
    if (pid === undefined) return false;
    process.kill(pid, "SIGSTOP");
    actedOn.set(target, pid);
    c.note(`${target}: worker ${params.worker} (pid ${pid}) SIGSTOPped`);
    return true;
  },
  async stop(_c, _family, target) {
    try {
      process.kill(actedOn.get(target)!, "SIGCONT");
    } catch {
      // gone meanwhile (its primary killed it at a stop): nothing to resume
    }
  },
  effects: (family, target) => ({
    effects: [{ servers: [target], codes: [...NO_ANSWER, ...family.storeCodes] }],
    settleMs: family.recoveryMs,
  }),
};
