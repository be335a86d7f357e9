// A holder partitioned from ZooKeeper past its session while a second process as its identity takes
// its marker (registry-zk README, "When the session is lost"), on the strict families only
// (`snowflake.zk.stopWithoutSession`): the README promises that "a holder issues nothing past the
// instant another process as the same ip:port could hold the marker". The default mode does not
// guarantee it (the holder keeps issuing until it reattaches), so `same-identity` leaves it out.
//
// The holder H's link to ZooKeeper is cut (its TcpProxy); the fault waits until ZooKeeper has
// dropped H's marker (its session expired: the four-letter `dump`, as `same-identity` reads it;
// given up after MARKER_GONE_WAIT_MS), then starts the spare S as H's identity (as `same-identity`
// does: LEAF_SNOWFLAKE_PORT is H's port, so S asks for H's node and shares its cache file, on H's
// clock), again every 300 ms while refused. S then takes the marker and H's worker id and issues
// (its clients ask while it runs) while H stays cut. At the end H's link is healed first: H
// reattaches, must find its marker taken and lose its lease; both run side by side for 3 s, then S
// is killed, its environment and clock put back, and the fault waits (at most REGAIN_WAIT_MS) until
// H holds its worker id again (S's session expired). A holder that issues past its fence repeats
// S's ids or dates ids of the worker id inside S's tenure: the checker's `duplicates` and
// `worker-ids`.
import { idsFrom } from "../checker";
import { type Cluster, sleep } from "../cluster";
import type { Family } from "../families";
import { type Fault, mainServers, NO_ANSWER } from "./fault";
import {
  attachedHolder,
  identityResources,
  markerOwner,
  RETRY_MS,
  spareIn,
  spareOf,
} from "./same-identity";

/** Most ms to wait after the cut for ZooKeeper to drop H's marker (the session is 4 s). */
const MARKER_GONE_WAIT_MS = 15_000;
/** Most ms to wait after the heal for H to find its marker taken (its monitor's lease-lost). */
const HEAL_SEEN_WAIT_MS = 10_000;
/** ms the healed holder and S run side by side before S is killed. */
const SIDE_BY_SIDE_MS = 3000;
/** Most ms to wait after S is killed for H to hold its worker id again. */
const REGAIN_WAIT_MS = 30_000;
/**
 * The fault is skipped when H's clock is further than this from more than half of the other
 * running servers': the registry's peer clock check refuses a start more than
 * `peerClockCheck.maxSkewMs` (5 s) off most live peers (CLOCK_SKEW, read from their reports), and S
 * runs on H's clock, which a lasting `clock-forward` may have left there. Closer to the limit S may
 * still be refused; the run notes it.
 */
const PEER_SKEW_MS = 5000;

/** What H's monitor says of its snowflake worker. */
interface Monitor {
  state?: string;
  workerId?: number;
  events?: Array<{ at: number; type: string; text: string }>;
}

interface Run {
  stopping: boolean;
  loop: Promise<void>;
  /** H's wall clock (its fake clock's) at the cut, to find its later monitor events. */
  cutAtHolderClock: number;
  /** ms from the cut until ZooKeeper listed no marker; undefined while still listed. */
  goneAfterMs: number | undefined;
  refused: number;
  lastRefusal: string | undefined;
  /** S's incarnation and history ms once a start succeeded. */
  started: { incarnation: number; atMs: number } | undefined;
}

const runs = new Map<string, Run>();

async function monitorOf(c: Cluster, label: string): Promise<Monitor | undefined> {
  const page = await c
    .server(label)
    .getJson<{ snowflake?: Monitor }>("/api/v1/monitor", 1500)
    .catch(() => undefined);
  return page?.snowflake;
}

/** H's wall clock now (libfaketime: the real clock plus its offset), as its monitor dates events. */
function holderNow(c: Cluster, holder: string): number {
  return Date.now() + c.clocks.get(holder)!.offsetMs;
}

async function start(c: Cluster, family: Family, holder: string): Promise<boolean> {
  const spare = spareIn(family);
  const holderServer = c.server(holder);
  const spareServer = c.server(spare);
  if (!holderServer.running || spareServer.running) return false;
  const peers = mainServers(family).filter((l) => l !== holder && c.server(l).running);
  const offset = c.clocks.get(holder)!.offsetMs;
  const apart = peers.filter((l) => Math.abs(offset - c.clocks.get(l)!.offsetMs) > PEER_SKEW_MS);
  if (apart.length * 2 > peers.length) {
    c.note(
      `${holder}'s clock is more than ${PEER_SKEW_MS} ms off ${apart.join(", ")} of ${peers.join(", ")}: ${spare} on it would be refused (CLOCK_SKEW); no session-lost-identity`,
    );
    return false;
  }
  // A holder still taking its marker again (after a ZooKeeper outage) has no session to lose.
  const attached = await attachedHolder(c, holder, "session-lost-identity");
  if (!attached) return false;
  const { port, marker, zkPort, owner } = attached;
  const workerId = (await monitorOf(c, holder))?.workerId;
  c.proxy(holder, "zookeeper").cutOff();
  const run: Run = {
    stopping: false,
    loop: Promise.resolve(),
    cutAtHolderClock: holderNow(c, holder),
    goneAfterMs: undefined,
    refused: 0,
    lastRefusal: undefined,
    started: undefined,
  };
  c.note(
    `${holder}'s link to ZooKeeper cut; its marker ${marker} (worker id ${workerId ?? "unknown"}) held by session ${owner}; ${spare} starts as 127.0.0.1:${port} once the marker is gone`,
  );
  run.loop = (async () => {
    const cutAt = performance.now();
    for (;;) {
      const now = await markerOwner(zkPort, marker);
      if (now === "gone") break;
      if (run.stopping || performance.now() - cutAt >= MARKER_GONE_WAIT_MS) {
        c.note(
          `${holder}'s marker still listed ${Math.round(performance.now() - cutAt)} ms after the cut (${now === undefined ? "ZooKeeper did not answer" : `session 0x${now.toString(16)}`}): ${spare} not started`,
        );
        return;
      }
      await sleep(250);
    }
    run.goneAfterMs = Math.round(performance.now() - cutAt);
    c.note(
      `${holder}'s marker gone ${run.goneAfterMs} ms after the cut (its session expired); ${spare} starts as ${holder}'s identity`,
    );
    const env = c.envs.get(spare)!;
    env.LEAF_SNOWFLAKE_PORT = String(port);
    while (!run.stopping) {
      // One machine, one wall clock: S runs on the holder's clock.
      c.clocks.get(spare)!.set(c.clocks.get(holder)!.offsetMs);
      const outcome = await spareServer.tryStart();
      if (outcome.started) {
        run.started = { incarnation: spareServer.incarnation, atMs: c.history.now() };
        c.note(
          `${spare} STARTED as ${holder}'s identity 127.0.0.1:${port} (#${spareServer.incarnation}, ${Math.round(outcome.ms)} ms) after ${run.refused} refused starts, ${Math.round(performance.now() - cutAt)} ms after the cut; ${holder} stays cut`,
        );
        return;
      }
      run.refused++;
      run.lastRefusal =
        /[A-Z_]{6,}[^\n]{0,200}/.exec(outcome.output)?.[0] ?? `exit ${outcome.code}, no reason`;
      c.note(
        `${spare} refused (#${spareServer.incarnation}, exit ${outcome.code}): ${run.lastRefusal}`,
      );
      if (!run.stopping) await sleep(RETRY_MS);
    }
  })();
  runs.set(holder, run);
  return true;
}

/** Polls H's monitor until `done` or `ms` passed; the last page read. */
async function watch(
  c: Cluster,
  holder: string,
  ms: number,
  done: (m: Monitor) => boolean,
): Promise<{ monitor: Monitor | undefined; ms: number; done: boolean }> {
  const from = performance.now();
  let monitor: Monitor | undefined;
  for (;;) {
    monitor = await monitorOf(c, holder);
    if (monitor && done(monitor)) return { monitor, ms: performance.now() - from, done: true };
    if (performance.now() - from >= ms) {
      return { monitor, ms: performance.now() - from, done: false };
    }
    await sleep(200);
  }
}

async function stop(c: Cluster, family: Family, holder: string): Promise<void> {
  const spare = spareIn(family);
  const spareServer = c.server(spare);
  const run = runs.get(holder);
  runs.delete(holder);
  if (run) run.stopping = true;
  // H first: it reattaches beside a running S and must find its marker taken.
  c.proxy(holder, "zookeeper").heal();
  const healMs = c.history.now();
  const healAt = performance.now();
  if (run?.started && spareServer.running) {
    const lost = (m: Monitor) =>
      m.events?.find((e) => e.type === "lease-lost" && e.at >= run.cutAtHolderClock);
    const seen = await watch(c, holder, HEAL_SEEN_WAIT_MS, (m) => lost(m) !== undefined);
    const event = seen.monitor ? lost(seen.monitor) : undefined;
    c.note(
      event
        ? `${holder} lost its lease ${Math.round(seen.ms)} ms after the heal (state ${seen.monitor?.state}): ${event.text.slice(0, 240)}`
        : `${holder} had not lost its lease ${Math.round(seen.ms)} ms after the heal (state ${seen.monitor?.state ?? "no monitor"})`,
    );
    await sleep(SIDE_BY_SIDE_MS);
  }
  await run?.loop;
  const spareRan = run?.started !== undefined && spareServer.running;
  const stoppedMs = c.history.now();
  if (spareServer.running) await spareServer.kill();
  delete c.envs.get(spare)!.LEAF_SNOWFLAKE_PORT;
  c.clocks.get(spare)!.set(0);
  if (!run) return;
  // H holds its worker id again once S's session expired and its acquire and start wait ended.
  const regained = (m: Monitor) =>
    m.state === "held" &&
    (m.events ?? []).some((e) => e.type === "lease-acquired" && e.at >= run.cutAtHolderClock);
  const back = await watch(
    c,
    holder,
    REGAIN_WAIT_MS,
    spareRan ? regained : (m) => m.state === "held",
  );
  const since = spareRan
    ? `${Math.round(back.ms)} ms after ${spare} was killed`
    : `${Math.round(performance.now() - healAt)} ms after the heal`;
  const started = run.started;
  const during = started
    ? `; ${holder} issued ${idsFrom(c.history, holder, started.atMs, healMs)} ids while ${spare} ran cut off, ${idsFrom(c.history, holder, healMs, stoppedMs)} after the heal; ${spare} issued ${idsFrom(c.history, spare, started.atMs, stoppedMs)}`
    : "";
  c.note(
    `session-lost-identity ${holder}: marker ${run.goneAfterMs === undefined ? "never gone" : `gone ${run.goneAfterMs} ms after the cut`}; ${started ? `${spare} STARTED (#${started.incarnation}) after ${run.refused} refused starts` : `${spare} never started (${run.refused} refused${run.lastRefusal ? `, last: ${run.lastRefusal.slice(0, 160)}` : ""})`}${during}; ${holder} ${back.done ? `held its worker id again ${since}` : `did not hold its worker id ${since} (state ${back.monitor?.state ?? "no monitor"})`}`,
  );
}

export const sessionLostIdentity: Fault = {
  name: "session-lost-identity",
  title:
    "strict ZooKeeper normal mode: a holder's link to ZooKeeper cut past its session; once its marker is gone a second process as its ip:port takes it and issues; the holder healed beside it, then the second killed, 15-24 s",
  targets: (family) => (family.zkStrict && spareOf(family) ? mainServers(family) : []),
  // Every main server's clock too: S's start must pass the peer clock check (H's clock against
  // the others'), which a step of another server's clock meanwhile would fail (seed 13, 2 min: a
  // 1 h step of A during the fault, S refused 11 times with CLOCK_SKEW).
  resources: (target, family) => [
    ...identityResources(target, family),
    ...mainServers(family).map((label) => `clock:${label}`),
  ],
  // The session (4 s) expires, S starts (its start waits past H's last report + 4 s) and issues for
  // several seconds.
  durationMs: [15_000, 24_000],
  start: (c, family, target) => start(c, family, target),
  stop: (c, family, target) => stop(c, family, target),
  // H: LEASE_LOST (fenced, then its lease lost) and NOT_INITIALIZED until it holds its worker id
  // again (the fault's stop waits for that); S: nothing while it starts or after it is killed.
  effects: (family, target) => ({
    effects: [
      { servers: [target], codes: family.storeCodes },
      { servers: [spareIn(family)], codes: [...NO_ANSWER, ...family.storeCodes] },
    ],
    settleMs: family.recoveryMs,
  }),
};
