// One server's wall clock stepped forward 5-10 s for 1.2-2.2 s (about the local registry's lock
// heartbeat, 2.5 s by default; shorter than a report period, 3 s) and set back, then the server SIGKILLed at once: a server of one
// process restarted after 0.2-1.5 s, a server of worker processes losing one worker, which its
// primary starts again at once. The attacker's finding of 28 Nov: the local registry's heartbeat
// stamped the stepped clock, the cache file the restart reads did not, and the restarted holder
// issued the stepped ids again (registry-local's clock-step test is its own).
import { sleep } from "../cluster";
import { type Fault, mainServers, NO_ANSWER, processOf } from "./fault";
import { actedOn, drawWorker, workerPid, workerServingAgain } from "./worker-pids";

export const clockBlipKill: Fault = {
  name: "clock-blip-kill",
  title:
    "one server's wall clock 5-10 s ahead for 1.2-2.2 s, set back, then SIGKILL (of one worker where the server has several) and a restart at once",
  targets: (family) => (family.clockCodes.length > 0 ? mainServers(family) : []),
  resources: (target) => [processOf(target), `clock:${target}`],
  durationMs: [200, 1500],
  params: (rng) => ({
    forwardMs: rng.int(5000, 10_000),
    blipMs: rng.int(1200, 2200),
    ...drawWorker(rng),
  }),
  async start(c, family, target, params) {
    const server = c.server(target);
    if (!server.running) return false;
    const pid = family.workers ? await workerPid(c, target, params) : undefined;
    if (family.workers && pid === undefined) return false;
    const clock = c.clocks.get(target)!;
    const before = clock.offsetMs;
    clock.set(before + Number(params.forwardMs));
    await sleep(Number(params.blipMs));
    clock.set(before);
    if (pid !== undefined) {
      process.kill(pid, "SIGKILL");
      actedOn.set(target, pid);
      c.note(`${target}: worker ${params.worker} (pid ${pid}) SIGKILLed after the blip`);
    } else {
      await server.kill();
    }
    return true;
  },
  async stop(c, family, target, params) {
    if (!family.workers) {
      // A report that landed in the blip stored the stepped clock: the restart is refused
      // (CLOCK_BEHIND_LEASE) until the clock passes it, up to forwardMs, retried every 2 s.
      await c.startServer(
        target,
        family.restartAttempts + Math.ceil(Number(params.forwardMs) / 2000) + 1,
      );
      return;
    }
    await workerServingAgain(c, target, params);
  },
  effects: (family, target) => ({
    effects: [
      { servers: [target], codes: [...NO_ANSWER, ...family.storeCodes, ...family.clockCodes] },
    ],
    settleMs: family.recoveryMs,
  }),
};
