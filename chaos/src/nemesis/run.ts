// Runs one schedule against one family: stores and servers started, load on, each fault started and
// stopped at its time (faults holding one resource wait for each other), everything healed, load
// stopped, the history checked. And the shrinker: a failing schedule is run again without one fault
// at a time, keeping every smaller schedule that still fails, until none does.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { check, idsFrom, type Verdict, type Window } from "./checker";
import { Cluster, sleep } from "./cluster";
import type { Family } from "./families";
import { faultNamed } from "./faults/catalogue";
import { History } from "./history";
import { NemesisLoad } from "./load";
import { describeStep, type Schedule, type Step, without } from "./schedule";

/** Faults in which a spare takes a held worker id over. */
const TAKEOVERS = ["standby", "second-pod", "clock-forward-cut"];

/** What one run of one schedule gave. */
export interface FamilyRun {
  schedule: Schedule;
  verdict: Verdict;
  /** Faults started, by name (a fault that found its target down is not counted). */
  applied: Record<string, number>;
  windows: Window[];
  events: Array<{ atMs: number; text: string }>;
  /** Set when the run itself broke (a store that would not start): not a verdict. */
  error?: string;
  ms: number;
}

/** Runs `schedule` on a fresh cluster of `family`. */
export async function runSchedule(
  family: Family,
  schedule: Schedule,
  log: (line: string) => void,
): Promise<FamilyRun> {
  const t0 = performance.now();
  const dir = mkdtempSync(join(tmpdir(), `leaf-nemesis-${family.name}-`));
  const history = new History();
  const cluster = new Cluster(dir, history, log);
  const windows: Window[] = [];
  const applied: Record<string, number> = {};
  let load: NemesisLoad | undefined;
  let error: string | undefined;
  try {
    await cluster.startStores(family.stores, family.tags);
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
          cluster.note(`${describeStep(step)}: skipped (its target is not running)`);
          return;
        }
        applied[step.fault] = (applied[step.fault] ?? 0) + 1;
        cluster.note(`start ${describeStep(step)}`);
        const effects = fault.effects(family, step.target, step.params);
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
    if (!process.env.LEAF_CHAOS_KEEP) rmSync(dir, { recursive: true, force: true });
  }
  return {
    schedule,
    verdict: check(history, windows, cluster.down, cluster.broken),
    applied,
    windows,
    events: history.events,
    error,
    ms: performance.now() - t0,
  };
}

/** Whether `run` broke at least the most serious promise `original` broke. */
function stillFails(original: FamilyRun, run: FamilyRun): boolean {
  if (run.error) return false;
  const worst = original.verdict.broken[0];
  return worst !== undefined && run.verdict.broken.includes(worst);
}

/**
 * Drops faults one at a time from a failing run's schedule, keeping a smaller schedule whenever it
 * still fails, until no single drop fails or `maxRuns` runs were made. Returns the smallest.
 */
export async function shrink(
  family: Family,
  failing: FamilyRun,
  maxRuns: number,
  log: (line: string) => void,
): Promise<{ smallest: FamilyRun; runs: number }> {
  let smallest = failing;
  let runs = 0;
  let progress = true;
  while (progress && runs < maxRuns) {
    progress = false;
    for (const step of [...smallest.schedule.steps].reverse()) {
      if (runs >= maxRuns) break;
      const candidate = without(smallest.schedule, step.id);
      runs++;
      log(`shrink ${runs}/${maxRuns}: without #${step.id} (${candidate.steps.length} faults left)`);
      const run = await runSchedule(family, candidate, () => undefined);
      if (stillFails(failing, run)) {
        log(`  still fails (${run.verdict.broken.join(", ")}): #${step.id} dropped`);
        smallest = run;
        progress = true;
        break;
      }
      log("  passes: keeps it");
    }
  }
  return { smallest, runs };
}
