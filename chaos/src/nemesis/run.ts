// Runs one schedule against one family: stores and servers started, load on, each fault started and
// stopped at its time (faults holding one resource wait for each other), everything healed, load
// stopped, the history checked. And the shrinker: a failing schedule is run again without one fault
// at a time, keeping every smaller schedule that still fails, until none does.
import { copyFileSync, mkdirSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { check, idsFrom, type Verdict, type Window } from "./checker";
import { Cluster, sleep } from "./cluster";
import type { Family } from "./families";
import { faultNamed } from "./faults/catalogue";
import { peerSkewEffects } from "./faults/fault";
import { History } from "./history";
import { NemesisLoad } from "./load";
import { cutAt, describeStep, type Schedule, type Step, without } from "./schedule";
import { OwnStalls, type Stall, serverStalls, stallWindows } from "./stalls";
import { type SnowflakeLayouts, snowflakeLayouts } from "./worker-tenures";

/** Faults in which a spare takes a held worker id over. */
const TAKEOVERS = ["standby", "second-pod", "clock-forward-cut", "standby-follower"];

/** What one run of one schedule gave. */
export interface FamilyRun {
  schedule: Schedule;
  verdict: Verdict;
  /** Faults started, by name (a fault that found its target down is not counted). */
  applied: Record<string, number>;
  /** Steps that found their target down, or found they could test nothing, and did nothing. */
  skipped: number[];
  windows: Window[];
  events: Array<{ atMs: number; text: string }>;
  /** Stalls measured (servers' and the nemesis's own), and how many were windows (>= STALL_MS). */
  stalls: { count: number; windows: number; longest: Stall | undefined };
  /** Set when the run itself broke (a store that would not start): not a verdict. */
  error?: string;
  /** The folder the servers' logs were copied to (a failed verdict or a run error, with `keepLogsIn`). */
  logs?: string;
  ms: number;
}

/**
 * Runs `schedule` on a fresh cluster of `family`. With `keepLogsIn`, a run that fails (or breaks)
 * leaves every server's log (all its starts, one file per server) in a folder under it, named by
 * family and seed, since the history alone does not say why a server answered what it did.
 */
export async function runSchedule(
  family: Family,
  schedule: Schedule,
  log: (line: string) => void,
  keepLogsIn?: string,
): Promise<FamilyRun> {
  const t0 = performance.now();
  const dir = mkdtempSync(join(tmpdir(), `leaf-nemesis-${family.name}-`));
  const history = new History();
  const cluster = new Cluster(dir, history, log);
  const windows: Window[] = [];
  const applied: Record<string, number> = {};
  const skipped: number[] = [];
  let load: NemesisLoad | undefined;
  let error: string | undefined;
  const own = new OwnStalls((hr) => history.msAtHr(hr));
  let stalls: Stall[] = [];
  let layouts: SnowflakeLayouts | undefined;
  try {
    await cluster.startStores(family.stores, family.tags, family);
    await cluster.prepare(family.servers);
    const labels = family.servers.filter((s) => !s.spare).map((s) => s.label);
    const startedAll = await Promise.all(
      labels.map((label) => cluster.startServer(label, family.restartAttempts)),
    );
    const failed = labels.find((_, i) => !startedAll[i]);
    if (failed !== undefined) {
      throw new Error(
        `server ${failed} did not start: ${cluster.server(failed).output.slice(-600)}`,
      );
    }
    cluster.down.length = 0;
    load = new NemesisLoad(cluster, family, history);
    history.begin();
    own.begin();
    const started = history.now();
    load.start();
    const locks = new Map<string, Promise<void>>();
    const runStep = async (step: Step) => {
      const fault = faultNamed(step.fault);
      await sleep(Math.max(0, started + step.atMs - history.now()));
      // Wait for any fault still holding one of this one's resources (a restart running late).
      const resources = fault.resources(step.target, family);
      let release!: () => void;
      const mine = new Promise<void>((resolve) => {
        release = resolve;
      });
      const before = resources.map((r) => locks.get(r) ?? Promise.resolve());
      for (const r of resources) locks.set(r, mine);
      await Promise.all(before);
      try {
        const fromMs = history.now();
        const ok = await fault.start(cluster, family, step.target, step.params);
        if (!ok) {
          cluster.note(
            `${describeStep(step)}: skipped (its target is not running, or the fault found it could test nothing)`,
          );
          skipped.push(step.id);
          return;
        }
        applied[step.fault] = (applied[step.fault] ?? 0) + 1;
        cluster.note(`start ${describeStep(step)}`);
        const own = fault.effects(family, step.target, step.params);
        const setsClock = fault.resources(step.target, family).some((r) => r.startsWith("clock:"));
        const effects = setsClock
          ? { ...own, effects: [...own.effects, ...peerSkewEffects(cluster.clocks, family)] }
          : own;
        const window: Window = {
          step: step.id,
          fault: step.fault,
          target: step.target,
          fromMs,
          stoppedMs: Infinity,
          toMs: Infinity,
          effects: effects.effects,
        };
        windows.push(window);
        await sleep(step.durationMs);
        try {
          await fault.stop(cluster, family, step.target, step.params);
        } catch (e) {
          cluster.note(
            `stop #${step.id} ${step.fault} failed: ${e instanceof Error ? e.message : e}`,
          );
        }
        window.stoppedMs = history.now();
        if (!effects.lasting) window.toMs = history.now() + effects.settleMs;
        if (TAKEOVERS.includes(step.fault)) {
          // Both sides of a takeover must have issued ids during it, or it tested nothing.
          const spare = family.servers.find((s) => s.spare)!.label;
          cluster.note(
            `#${step.id} ${step.fault}: ${step.target} issued ${idsFrom(history, step.target, fromMs, window.stoppedMs)} ids, ${spare} ${idsFrom(history, spare, fromMs, window.stoppedMs)} ids during it`,
          );
        }
        cluster.note(`stop #${step.id} ${step.fault} ${step.target}`);
      } finally {
        release();
      }
    };
    await Promise.all(schedule.steps.map(runStep));
    await sleep(Math.max(0, started + schedule.durationMs - history.now()));
  } catch (e) {
    error = e instanceof Error ? e.message : String(e);
    log(`  run error: ${error}`);
  } finally {
    await load?.stop();
    await cluster.dispose();
    own.stop();
    const labels = family.servers.map((s) => s.label);
    stalls = [...own.stalls, ...serverStalls(dir, labels, (hr) => history.msAtHr(hr))];
    try {
      layouts = snowflakeLayouts(cluster, family);
    } catch (e) {
      error ??= `the servers' snowflake layouts: ${e instanceof Error ? e.message : e}`;
    }
  }
  const starved = stallWindows(family, stalls);
  const verdict = check(history, [...windows, ...starved], cluster.down, cluster.broken, layouts);
  let logs: string | undefined;
  if (keepLogsIn !== undefined && (verdict.failed || error !== undefined)) {
    logs = keepServerLogs(dir, join(keepLogsIn, `logs-${family.name}-seed-${schedule.seed}`));
    log(`  the servers' logs: ${logs}`);
  }
  if (!process.env.LEAF_CHAOS_KEEP) rmSync(dir, { recursive: true, force: true });
  return {
    schedule,
    verdict,
    applied,
    skipped,
    windows: [...windows, ...starved],
    events: history.events,
    stalls: {
      count: stalls.length,
      windows: starved.length,
      longest: stalls.reduce<Stall | undefined>((a, b) => (!a || b.ms > a.ms ? b : a), undefined),
    },
    error,
    logs,
    ms: performance.now() - t0,
  };
}

/** Copies the servers' logs (`LABEL.log` in the run's folder) into `to` (emptied first). */
function keepServerLogs(dir: string, to: string): string {
  rmSync(to, { recursive: true, force: true });
  mkdirSync(to, { recursive: true });
  for (const name of readdirSync(dir)) {
    if (name.endsWith(".log")) copyFileSync(join(dir, name), join(to, name));
  }
  return to;
}

/** Whether `run` broke at least the most serious promise `original` broke. */
function stillFails(original: FamilyRun, run: FamilyRun): boolean {
  if (run.error) return false;
  const worst = original.verdict.broken[0];
  return worst !== undefined && run.verdict.broken.includes(worst);
}

/** Times a smaller schedule is run before it counts as passing (timing decides many failures). */
const TRIES = 2;

/**
 * Drops faults from a failing run's schedule, keeping a smaller schedule whenever it still fails
 * (within {@link TRIES} runs): first every step that was skipped in the failing run (it did nothing
 * there), then every step that started after its first duplicate's second answer, then runs of
 * steps from the last, half the schedule at a time, then a quarter, down to one step at a time,
 * until no single drop fails or `maxRuns` runs were made. Returns the smallest.
 */
export async function shrink(
  family: Family,
  failing: FamilyRun,
  maxRuns: number,
  log: (line: string) => void,
): Promise<{ smallest: FamilyRun; runs: number }> {
  let smallest = failing;
  let runs = 0;
  const attempt = async (candidate: Schedule, what: string): Promise<boolean> => {
    for (let i = 0; i < TRIES && runs < maxRuns; i++) {
      runs++;
      log(
        `shrink ${runs}/${maxRuns}: ${what} (${candidate.steps.length} faults left), try ${i + 1}`,
      );
      const run = await runSchedule(family, candidate, () => undefined);
      if (stillFails(failing, run)) {
        log(`  still fails (${run.verdict.broken.join(", ")})`);
        smallest = run;
        return true;
      }
      log(`  passes (${run.verdict.ids.toLocaleString("en-US")} ids)`);
    }
    return false;
  };
  if (failing.skipped.length > 0 && failing.skipped.length < failing.schedule.steps.length) {
    await attempt(
      without(failing.schedule, failing.skipped),
      `without the skipped ${failing.skipped.map((id) => `#${id}`).join(", ")}`,
    );
  }
  const duplicate = failing.verdict.firstDuplicate;
  if (duplicate && failing.verdict.broken[0] === "duplicates") {
    const cut = cutAt(smallest.schedule, duplicate.second.toMs);
    if (cut.steps.length > 0 && cut.steps.length < smallest.schedule.steps.length) {
      await attempt(
        cut,
        `without the faults started after the first duplicate (${(duplicate.second.toMs / 1000).toFixed(1)} s)`,
      );
    }
  }
  let size = Math.ceil(smallest.schedule.steps.length / 2);
  while (runs < maxRuns && smallest.schedule.steps.length > 1) {
    const steps = smallest.schedule.steps;
    let dropped = false;
    for (let end = steps.length; end > 0 && runs < maxRuns; end -= size) {
      const ids = steps.slice(Math.max(0, end - size), end).map((s) => s.id);
      if (ids.length === steps.length) continue;
      const what = ids.length === 1 ? `without #${ids[0]}` : `without #${ids[0]}-#${ids.at(-1)}`;
      if (await attempt(without(smallest.schedule, ids), what)) {
        dropped = true;
        break;
      }
    }
    if (dropped) size = Math.min(size, Math.ceil(smallest.schedule.steps.length / 2));
    else if (size === 1) break;
    else size = Math.ceil(size / 2);
  }
  return { smallest, runs };
}
