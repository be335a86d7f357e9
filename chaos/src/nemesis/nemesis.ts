// A nemesis run: for each family in turn, a schedule drawn from the seed, run against a fresh
// cluster under load, checked; a failing family prints its seed, schedule and first duplicate, is
// shrunk to the smallest schedule that still fails, and that schedule is written out for replay.
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Family } from "./families";
import type { Answer } from "./history";
import { type FamilyRun, runSchedule, shrink } from "./run";
import { describeStep, generate, type Schedule } from "./schedule";
import { STALL_MS } from "./stalls";
import type { TenureText } from "./worker-tenures";

/** Options of {@link runNemesis}. */
export interface NemesisOptions {
  families: Family[];
  seed: number;
  /** ms each family runs. */
  familyMs: number;
  exclude: string[];
  /** Most runs the shrinker makes per failing family (0: no shrinking). */
  shrinkRuns: number;
  /** Folder of NEMESIS.json and the failing schedules. */
  resultsDir: string;
  /** Replay this schedule instead of drawing one (its family only). */
  schedule?: Schedule;
  log: (line: string) => void;
}

/** What a nemesis run found, per family. */
export interface NemesisResult {
  seed: number;
  families: Array<{ family: string; run: FamilyRun; smallest?: FamilyRun; shrinkRuns?: number }>;
  failed: number;
}

/** Runs every family (or the given schedule) and reports. */
export async function runNemesis(options: NemesisOptions): Promise<NemesisResult> {
  const { log } = options;
  const result: NemesisResult = { seed: options.seed, families: [], failed: 0 };
  mkdirSync(options.resultsDir, { recursive: true });
  for (const family of options.families) {
    const schedule =
      options.schedule ?? generate(family, options.seed, options.familyMs, options.exclude);
    log(`\n== ${family.name}: ${family.title}`);
    log(
      `   seed ${schedule.seed}, ${(schedule.durationMs / 1000).toFixed(0)} s, ${schedule.steps.length} faults:`,
    );
    for (const step of schedule.steps) log(`     ${describeStep(step)}`);
    const run = await runSchedule(family, schedule, log, options.resultsDir);
    log(summary(family, run));
    const entry: NemesisResult["families"][number] = { family: family.name, run };
    if (run.verdict.failed || run.error) {
      result.failed++;
      log(failureText(family, run, options));
      if (run.verdict.failed && options.shrinkRuns > 0 && run.schedule.steps.length > 0) {
        const { smallest, runs } = await shrink(family, run, options.shrinkRuns, log);
        entry.smallest = smallest;
        entry.shrinkRuns = runs;
        const file = join(options.resultsDir, `nemesis-${family.name}-seed-${schedule.seed}.json`);
        writeFileSync(file, `${JSON.stringify(smallest.schedule, null, 2)}\n`);
        log(
          `\nSmallest failing schedule of ${family.name} (seed ${schedule.seed}, ${runs} shrink runs): ${smallest.schedule.steps.length} fault(s)`,
        );
        for (const step of smallest.schedule.steps) log(`     ${describeStep(step)}`);
        log(
          `   broke: ${smallest.verdict.broken.join(", ")}${firstDuplicateText(smallest)}${firstOverlapText(smallest)}`,
        );
        log(`   replay it: pnpm test:nemesis --schedule ${file}`);
      }
    }
    result.families.push(entry);
  }
  writeFileSync(
    join(options.resultsDir, "NEMESIS.json"),
    `${JSON.stringify(result, (_k, v) => (typeof v === "bigint" ? v.toString() : v === Infinity ? "end" : v), 2)}\n`,
  );
  log(
    `\nnemesis seed ${options.seed}: ${result.families.length} famil${result.families.length === 1 ? "y" : "ies"}, ${result.failed} failed`,
  );
  return result;
}

const s = (ms: number) => `${(ms / 1000).toFixed(1)} s`;

/** One paragraph per family: ids, faults applied, duplicates, codes, longest waits. */
export function summary(family: Family, run: FamilyRun): string {
  const v = run.verdict;
  const dup = Object.values(v.duplicates).reduce((a, b) => a + b, 0);
  const applied =
    Object.entries(run.applied)
      .map(([name, n]) => `${name} x${n}`)
      .join(", ") || "none";
  const gaps = v.gaps
    .slice(0, 3)
    .map(
      (g) =>
        `${g.client} ${s(g.ms)}${g.during.length > 0 ? ` (during ${g.during.join(", ")})` : " (NO FAULT ACTIVE)"}`,
    )
    .join("; ");
  return [
    `   ${family.name}: ${v.failed ? "FAILED" : run.error ? "RUN ERROR" : "passed"} in ${s(run.ms)}; ${v.ids.toLocaleString("en-US")} ids in ${v.answers.toLocaleString("en-US")} answers (${v.failedAnswers} failed)`,
    `   faults applied: ${applied}`,
    `   duplicates ${dup}, worker-id overlaps ${v.overlaps}, decreases ${v.decreases}, undocumented codes ${v.undocumented.reduce((a, u) => a + u.count, 0)}`,
    `   longest without an id: ${gaps || "-"}`,
    `   stalls (a timer 300 ms late or more): ${run.stalls.count}${run.stalls.longest ? `, longest ${s(run.stalls.longest.ms)} on ${run.stalls.longest.server === "*" ? "the nemesis (the machine)" : run.stalls.longest.server} at ${s(run.stalls.longest.fromMs)}` : ""}; ${run.stalls.windows} of ${s(STALL_MS)} or more taken as CPU-starvation faults`,
  ].join("\n");
}

function answerText(a: Answer): string {
  return `${a.client} <- ${a.server}${a.incarnation ? ` #${a.incarnation}` : ""}, ${s(a.fromMs)}-${s(a.toMs)}, ${a.ids} ids`;
}

function firstDuplicateText(run: FamilyRun): string {
  const d = run.verdict.firstDuplicate;
  if (!d) return "";
  return `\n   first duplicate: id ${d.id} in ${d.space}\n     1st: ${answerText(d.first)}\n     2nd: ${answerText(d.second)}`;
}

function tenureText(t: TenureText): string {
  return `${t.process} ids dated ${s(t.fromMs)}-${s(t.toMs)} (${t.ids.toLocaleString("en-US")} ids, ${t.idsInOverlap.toLocaleString("en-US")} in the overlap), first id ${t.firstId} (${answerText(t.firstAnswer)}), last id ${t.lastId} (${answerText(t.lastAnswer)})`;
}

function firstOverlapText(run: FamilyRun): string {
  const o = run.verdict.firstOverlap;
  if (!o) return "";
  return `\n   first worker-id overlap: worker id ${o.workerId} in ${o.space}, the later one's first id dated inside the earlier one (dates by each server's clock, from the run's start)\n     earlier: ${tenureText(o.earlier)}\n     later: ${tenureText(o.later)}`;
}

function failureText(family: Family, run: FamilyRun, options: NemesisOptions): string {
  const v = run.verdict;
  const lines = [
    `\n!! ${family.name} FAILED with seed ${run.schedule.seed}: ${run.error ?? v.broken.join(", ")}`,
    options.schedule
      ? "   replay: pnpm test:nemesis with the same --schedule file"
      : `   replay: pnpm test:nemesis --seed ${run.schedule.seed} --only ${family.name} --minutes ${+(run.schedule.durationMs / 60_000).toFixed(4)}${options.exclude.length > 0 ? ` --exclude ${options.exclude.join(",")}` : ""}`,
  ];
  if (Object.keys(v.duplicates).length > 0) {
    lines.push(`   duplicates: ${JSON.stringify(v.duplicates)}${firstDuplicateText(run)}`);
  }
  if (v.overlaps > 0) lines.push(`   worker-id overlaps: ${v.overlaps}${firstOverlapText(run)}`);
  if (v.firstUndated)
    lines.push(`   ids dated a day or more away: ${v.undated}, first: ${v.firstUndated}`);
  if (v.firstDecrease) lines.push(`   decreases ${v.decreases}, first: ${v.firstDecrease}`);
  for (const u of v.undocumented.slice(0, 8)) {
    lines.push(
      `   undocumented ${u.code} x${u.count} to ${u.client}, first at ${s(u.firstMs)}: ${u.message.slice(0, 200)}`,
    );
  }
  return lines.join("\n");
}
