// A takeover of a held worker id, the moment issue 24 is about: a spare server (a standby, or a
// second pod) asks for exactly the worker id a running holder leases (snowflake.statefulSet with
// the pod name of that id), refused while the holder's lease is alive, while the holder's lease is
// made to lapse (its link to the registry cut, the process paused, or its wall clock stepped
// forward and the link cut 60 ms later). The spare tries again every 300 ms and takes the id when
// the registry lets it; at the end the holder is healed first and both run side by side for 3 s
// before the spare is killed: a holder that did not fence, or a spare dated below the holder's
// horizon, issues ids the other one issued.
import type { Cluster } from "../cluster";
import { sleep } from "../cluster";
import type { Family } from "../families";
import { type Effects, NO_ANSWER, type Params } from "./fault";

/** How the holder's lease is made to lapse. */
export const LAPSES = ["cut", "pause", "clock-forward-cut", "follower-partition"] as const;
export type Lapse = (typeof LAPSES)[number];

/** ms the healed holder and the spare run side by side before the spare is killed. */
const SIDE_BY_SIDE_MS = 3000;
/** ms between two start attempts of the spare. */
const RETRY_MS = 300;

interface Attempt {
  stopping: boolean;
  loop: Promise<void>;
  workerId: number;
}

const attempts = new Map<string, Attempt>();

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
  c.envs.get(spare)!.HOSTNAME = `leaf-${workerId}`;
  const store = family.leaseStore!;
  switch (lapse) {
    case "cut":
      c.proxy(holder, store).cutOff();
      break;
    case "pause":
      holderServer.pause();
      break;
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
): Promise<void> {
  const holderServer = c.server(holder);
  if (lapse === "pause") {
    if (holderServer.running) holderServer.resume();
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
