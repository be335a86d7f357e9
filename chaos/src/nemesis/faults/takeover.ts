// A takeover of a held worker id, the moment issue 24 is about: a spare server (a standby, or a
// second pod) asks for exactly the worker id a running holder leases (snowflake.statefulSet with
// the pod name of that id), refused while the holder's lease is alive, while the holder's lease is
// made to lapse (its link to the registry cut, the process paused, or its wall clock stepped
// forward and the link cut 60 ms later). The spare tries again every 300 ms and takes the id when
// the registry lets it; at the end the holder is healed first and both run side by side for 3 s
// before the spare is killed: a holder that did not fence, or a spare dated below the holder's
// horizon, issues ids the other one issued. "batch-pause" aims the holder's SIGSTOP at the
// generator's wait for the next tick inside a batch of more than a tick's ids (an aim within a
// millisecond, which a busy machine often spoils), and wakes it while the spare makes such batches.

import { readFileSync } from "node:fs";
import { keepAliveAgent } from "@leaf/testkit";
import type { Cluster } from "../cluster";
import { sleep } from "../cluster";
import type { ClientSpec, Family } from "../families";
import { ask } from "../load";
import { undoStall } from "./clock-forward";
import { type Effects, NO_ANSWER, type Params } from "./fault";
import { workerPids } from "./worker-pids";

/** How the holder's lease is made to lapse. */
export const LAPSES = [
  "cut",
  "pause",
  "batch-pause",
  "clock-forward-cut",
  "follower-partition",
] as const;
export type Lapse = (typeof LAPSES)[number];

/** ms the healed holder and the spare run side by side before the spare is killed. */
const SIDE_BY_SIDE_MS = 3000;
/** ms between two start attempts of the spare. */
const RETRY_MS = 300;
/**
 * Ids of the batch a "batch-pause" holder is paused in: above a tick's 4,096 and at most two
 * ticks' worth. Made alone, such a batch takes a tick's ids, turns the event loop once, waits for
 * the next tick (the rest of the millisecond) and ends in it: a SIGSTOP in that wait leaves only
 * the check after it between the holder and a tick past its lease (a batch that waits again is
 * checked at the start of the generator's slow path, and refused).
 */
const PAUSED_BATCH = [4097, 8192] as const;
/**
 * The spare's batches when the holder wakes: four of 10,000 ids (the server's maxBatch), written at
 * once. The server takes their chunks of a tick's ids back to back before it answers any, so it
 * issues in every tick for about 10 ms; the holder is woken SPARE_AIM_MS into that.
 */
const SPARE_BATCHES = [10_000, 10_000, 10_000, 10_000];
const SPARE_AIM_MS = [1, 4] as const;
/**
 * ms after the server starts on the request (its main thread leaves its idle wait for events)
 * that the holder is paused or woken: a random time in this range, measured by spinning (timers
 * are too coarse). The server reads the request and takes the first tick's ids in about 0.1-0.4
 * ms; the wait for the next tick that follows lasts the rest of that millisecond.
 */
const AIM_MS = [0.1, 0.8] as const;
/** Most ms to wait for the server to be idle before the request, and to start on it after. */
const AIM_PATIENCE_MS = 50;
/** ms the batch's request waits for its answer: past the longest lapse (15 s). */
const BATCH_TIMEOUT_MS = 30_000;

interface Attempt {
  stopping: boolean;
  loop: Promise<void>;
  workerId: number;
}

const attempts = new Map<string, Attempt>();
/** The worker processes of a "pause" holder of several (server.workers), paused with it. */
const pausedWorkers = new Map<string, number[]>();

/** The holder's batch of a "batch-pause" lapse and when it was paused (wall clock, ms). */
const pausedBatches = new Map<
  string,
  { answer: Promise<bigint[] | undefined>; pausedAtMs: number }
>();

/**
 * Asks server `label` for batches of `counts` ids at once (the answers go to the history) and
 * returns, before the answers, a time in `aim` (ms) after the server started on them: each request
 * goes on a connection opened first (one id asked on it), so that all are written at once, when
 * the server is idle. `answer` is the first batch's.
 */
async function batchThenWait(
  c: Cluster,
  label: string,
  space: string,
  counts: number[],
  aim: readonly [number, number],
): Promise<{ answer: Promise<bigint[] | undefined>; all: Promise<unknown> }> {
  const spec: ClientSpec = {
    name: `nemesis batch ${label}`,
    kind: "json",
    mode: "snowflake",
    servers: [label],
    space,
    increasing: false,
  };
  const agent = keepAliveAgent(counts.length);
  const options = { agent, timeoutMs: BATCH_TIMEOUT_MS };
  await Promise.all(counts.map(() => ask(c, c.history, spec, 1, options)));
  const pid = c.server(label).pid;
  spinUntil(() => !running(pid), AIM_PATIENCE_MS);
  const answers = counts.map((count) => ask(c, c.history, spec, count, options));
  const all = Promise.all(answers).finally(() => agent.destroy());
  // The agent hands the open connection over on the next tick, and writes then.
  await new Promise<void>((resolve) => process.nextTick(resolve));
  spinUntil(() => running(pid), AIM_PATIENCE_MS);
  const until = performance.now() + aim[0] + Math.random() * (aim[1] - aim[0]);
  spinUntil(() => performance.now() >= until, aim[1]);
  return { answer: answers[0]!, all };
}

/** Spins until `done` or `ms` passed (a timer cannot aim within a millisecond). */
function spinUntil(done: () => boolean, ms: number): void {
  const end = performance.now() + ms;
  while (!done() && performance.now() < end) {
    // Spinning.
  }
}

/**
 * Whether process `pid`'s main thread runs code rather than waits in a system call (an idle Node
 * server waits in epoll): the first word of /proc/PID/syscall.
 */
function running(pid: number): boolean {
  try {
    return readFileSync(`/proc/${pid}/syscall`, "utf8").startsWith("running");
  } catch {
    return false;
  }
}

/** The main servers that hold a leased worker id (a family with a spare of `kind`). */
export function holders(family: Family, kind: "standby" | "second-pod"): string[] {
  if (!family.leaseStore || !family.servers.some((s) => s.spare === kind)) return [];
  return family.servers.filter((s) => !s.spare).map((s) => s.label);
}

/** The spare of `kind` in `family`. */
export function spareOf(family: Family, kind: "standby" | "second-pod"): string {
  const spare = family.servers.find((s) => s.spare === kind);
  if (!spare) throw new Error(`[leaf] [nemesis] ${family.name} has no ${kind}`);
  return spare.label;
}

/**
 * Resources of a takeover of `holder`'s id by `spare`: both processes, the holder's clock and link.
 */
export function takeoverResources(family: Family, holder: string, spare: string): string[] {
  return [
    `process:${holder}`,
    `clock:${holder}`,
    `link:${holder}~${family.leaseStore}`,
    `process:${spare}`,
  ];
}

/** Starts the lapse on `holder` and the spare's attempts at its worker id. */
export async function startTakeover(
  c: Cluster,
  family: Family,
  holder: string,
  spare: string,
  lapse: Lapse,
  params: Params,
): Promise<boolean> {
  const holderServer = c.server(holder);
  const spareServer = c.server(spare);
  if (!holderServer.running || spareServer.running) return false;
  const space = family.clients.find((x) => x.mode === "snowflake")!.space;
  const workerId = await c.heldWorkerId(holder, space);
  if (workerId === undefined) {
    c.note(`${holder} gave no id to decode: no takeover`);
    return false;
  }
  // A pod of N worker processes holds the block of ids from ordinal x N.
  c.envs.get(spare)!.HOSTNAME = `leaf-${Math.floor(workerId / (family.workers ?? 1))}`;
  const store = family.leaseStore!;
  switch (lapse) {
    case "cut":
      c.proxy(holder, store).cutOff();
      break;
    case "pause": {
      // The whole pod frozen: its worker processes first, then the primary.
      const workers = family.workers ? await workerPids(c, holder) : [];
      for (const pid of workers) process.kill(pid, "SIGSTOP");
      pausedWorkers.set(holder, workers);
      holderServer.pause();
      break;
    }
    case "batch-pause": {
      const count =
        PAUSED_BATCH[0] + Math.floor(Math.random() * (PAUSED_BATCH[1] - PAUSED_BATCH[0] + 1));
      const { answer } = await batchThenWait(c, holder, space, [count], AIM_MS);
      const pausedAtMs = Date.now();
      holderServer.pause();
      pausedBatches.set(holder, { answer, pausedAtMs });
      break;
    }
    case "clock-forward-cut": {
      const clock = c.clocks.get(holder)!;
      clock.set(clock.offsetMs + Number(params.forwardMs));
      await sleep(60);
      c.proxy(holder, store).cutOff();
      break;
    }
    case "follower-partition":
      // The holder's ZooKeeper member cut off from its ensemble (faults/standby-follower.ts).
      c.ensemble!.isolate(Number(params.member));
      break;
  }
  c.note(`${spare} asks for ${holder}'s worker id ${workerId} (${lapse} on ${holder})`);
  const attempt: Attempt = { stopping: false, workerId, loop: Promise.resolve() };
  attempt.loop = (async () => {
    let refusals = 0;
    while (!attempt.stopping && !spareServer.running) {
      const outcome = await spareServer.tryStart();
      if (outcome.started) {
        c.note(
          `${spare} took over worker id ${workerId} from ${holder} after ${refusals} refused starts (#${spareServer.incarnation})`,
        );
        return;
      }
      refusals++;
      await sleep(RETRY_MS);
    }
    if (!spareServer.running) {
      c.note(`${spare} never got worker id ${workerId}: ${refusals} refused starts`);
    }
  })();
  attempts.set(spare, attempt);
  return true;
}

/** Heals the holder, lets both run side by side, then kills the spare. */
export async function stopTakeover(
  c: Cluster,
  family: Family,
  holder: string,
  spare: string,
  lapse: Lapse,
  params: Params = {},
): Promise<void> {
  const holderServer = c.server(holder);
  if (lapse === "pause") {
    if (holderServer.running) holderServer.resume();
    for (const pid of pausedWorkers.get(holder) ?? []) {
      try {
        process.kill(pid, "SIGCONT");
      } catch {
        // Gone meanwhile (its primary was killed): nothing to resume.
      }
    }
    pausedWorkers.delete(holder);
  } else if (lapse === "batch-pause") {
    // The spare makes big batches too when the holder wakes, so that both issue in the tick the
    // holder wakes in (a holder that did not fence then issues the spare's ids).
    const spareServer = c.server(spare);
    const space = family.clients.find((x) => x.mode === "snowflake")!.space;
    const spareAnswer = spareServer.running
      ? await batchThenWait(c, spare, space, SPARE_BATCHES, SPARE_AIM_MS)
      : undefined;
    if (holderServer.running) holderServer.resume();
    await spareAnswer?.all;
    const paused = pausedBatches.get(holder);
    pausedBatches.delete(holder);
    const ids = await paused?.answer;
    if (paused && ids) {
      // Ids: a batch made before the SIGSTOP, or across the pause by a holder that did not fence
      // after its wait (the worker id S took, dated after the SIGSTOP).
      const highest = ids[ids.length - 1]!;
      const decoded = await holderServer.getJson<{ timestamp?: string; workerId?: string }>(
        `/decodeSnowflakeId?snowflakeId=${highest}`,
        1500,
      );
      const dated =
        decoded?.timestamp === undefined
          ? ""
          : `: its last id worker id ${decoded.workerId}, dated ${Number.parseInt(decoded.timestamp, 10) - c.clocks.get(holder)!.offsetMs - paused.pausedAtMs} ms after the SIGSTOP`;
      c.note(`${holder} answered the batch it was paused in with ${ids.length} ids${dated}`);
    } else if (paused) {
      c.note(`${holder} answered the batch it was paused in with no id`);
    }
  } else if (lapse === "follower-partition") {
    c.ensemble!.heal();
  } else {
    c.proxy(holder, family.leaseStore!).heal();
  }
  await sleep(SIDE_BY_SIDE_MS);
  const attempt = attempts.get(spare);
  attempts.delete(spare);
  if (attempt) {
    attempt.stopping = true;
    await attempt.loop;
  }
  const spareServer = c.server(spare);
  if (spareServer.running) await spareServer.kill();
  if (lapse === "clock-forward-cut") await undoStall(c, family, holder, Number(params.forwardMs));
}

/** What a takeover may cause: the holder fences or waits; the spare is refused or not answering. */
export function takeoverEffects(
  family: Family,
  holder: string,
  spare: string,
  lapse: Lapse,
): Effects {
  return {
    effects: [
      {
        servers: [holder],
        codes: [...NO_ANSWER, ...family.storeCodes, ...family.clockCodes],
      },
      { servers: [spare], codes: [...NO_ANSWER, ...family.storeCodes] },
    ],
    settleMs: family.recoveryMs,
    lasting: lapse === "clock-forward-cut",
  };
}
