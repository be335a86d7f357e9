// Runs scenarios one at a time against stores started once, and turns each into its report entry.
// The id budget of a run is shared out in proportion to each scenario's planned length.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { findLibfaketime } from "@leaf/testkit";
import { serverBuildTime } from "./leaf-process";
import {
  type ChaosReport,
  machineInfo,
  reportText,
  type ScenarioReport,
  writeReport,
} from "./report";
import { type RunContext, ScenarioRun } from "./scenario-run";
import { type Scenario, scenariosOf } from "./scenarios";
import { type ServiceNeeds, Services } from "./services";

/** Options of {@link runChaos}. */
export interface ChaosOptions {
  form: "short" | "full";
  /** Ids to issue over the whole run (shared out between the scenarios). */
  totalIds: number;
  /** Run only these scenarios (by name). */
  only?: string[];
  /** Folder of REPORT.json (or REPORT-short.json). */
  resultsDir: string;
  /** How the run was started, for the report. */
  command: string;
  /** Progress lines. */
  log?: (line: string) => void;
}

/** The scenarios a run would execute. */
export function selectScenarios(form: "short" | "full", only?: string[]): Scenario[] {
  const all = scenariosOf(form);
  if (!only || only.length === 0) return all;
  const unknown = only.filter((name) => !all.some((s) => s.name === name));
  if (unknown.length > 0) {
    throw new Error(
      `[leaf] [chaos] unknown scenario ${unknown.join(", ")}; the ${form} form has: ${all.map((s) => s.name).join(", ")}`,
    );
  }
  return all.filter((s) => only.includes(s.name));
}

/** Ids each scenario gets: `total` shared in proportion to planned seconds. */
export function budgets(scenarios: Scenario[], total: number): number[] {
  const seconds = scenarios.reduce((sum, s) => sum + s.plannedSeconds, 0);
  return scenarios.map((s) => Math.round((total * s.plannedSeconds) / seconds));
}

/** The stores the scenarios need together. */
export function needsOf(scenarios: Scenario[]): ServiceNeeds {
  return {
    mysql: scenarios.some((s) => s.needs.mysql),
    zookeeper: scenarios.some((s) => s.needs.zookeeper),
    redis: scenarios.some((s) => s.needs.redis),
  };
}

/** A run folder and the context scenarios share; `dispose` removes both stores and folder. */
export async function openRun(
  scenarios: Scenario[],
  log: (line: string) => void,
): Promise<{ ctx: RunContext; dispose(): Promise<void> }> {
  const dir = mkdtempSync(join(tmpdir(), "leaf-chaos-"));
  log(`run folder ${dir} (configs, data, server logs)`);
  const services = await Services.start(needsOf(scenarios));
  return {
    ctx: { services, dir, libfaketime: findLibfaketime(), log },
    async dispose() {
      await services.dispose();
      if (!process.env.LEAF_CHAOS_KEEP) rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Runs one scenario to its end and reports it; never throws for a failing scenario. */
export async function runScenario(
  scenario: Scenario,
  ctx: RunContext,
  budget: number,
): Promise<ScenarioReport> {
  const started = performance.now();
  ctx.log(`\n== ${scenario.name}: ${scenario.title} (${budget.toLocaleString("en-US")} ids)`);
  const base = {
    name: scenario.name,
    kind: scenario.kind,
    title: scenario.title,
    documented: scenario.documented,
    budget,
  };
  if (scenario.needs.faketime && !ctx.libfaketime) {
    return {
      ...base,
      ...empty(),
      status: "not run",
      failure: "libfaketime is not installed (apt-get install faketime)",
      durationMs: 0,
    };
  }
  if (scenario.needs.root && process.getuid?.() !== 0) {
    return {
      ...base,
      ...empty(),
      status: "not run",
      failure: "needs root (it mounts a tmpfs or runs unshare --pid)",
      durationMs: 0,
    };
  }
  const s = new ScenarioRun(ctx, scenario.name, budget, scenario.plannedSeconds);
  let summary = "";
  let failure: string | undefined;
  let outcome: Awaited<ReturnType<ScenarioRun["finish"]>> | undefined;
  try {
    summary = await scenario.run(s);
    outcome = await s.finish();
  } catch (error) {
    failure = error instanceof Error ? error.message : String(error);
    ctx.log(`  scenario failed: ${failure}`);
    // Whatever ids were received are still checked.
    outcome = await s.finish().catch(() => undefined);
  } finally {
    await s.dispose();
    await restoreServices(ctx);
  }
  const loops = outcome?.loops ?? [];
  const spaces = outcome?.spaces ?? [];
  const errors: Record<string, number> = {};
  for (const loop of loops) {
    for (const [code, tally] of Object.entries(loop.errors))
      errors[code] = (errors[code] ?? 0) + tally.count;
  }
  const longestNoId: ScenarioReport["longestNoId"] = {};
  for (const loop of loops) {
    const current = longestNoId[loop.mode];
    if (!current || loop.longestNoIdMs > current.ms) {
      longestNoId[loop.mode] = {
        ms: loop.longestNoIdMs,
        loop: loop.label,
        fromMs: loop.longestNoIdFromMs,
        toMs: loop.longestNoIdToMs,
        recovered: !loop.endedWithoutIds,
      };
    }
  }
  const duplicates = spaces.reduce((n, sp) => n + sp.duplicates, 0);
  const undecodable = spaces.reduce((n, sp) => n + sp.undecodable + sp.serverDecodeMismatches, 0);
  const decreases = loops.filter((l) => l.mustIncrease).reduce((n, l) => n + l.decreases, 0);
  const malformed = loops.reduce((n, l) => n + l.malformed, 0);
  const ids = spaces.reduce((n, sp) => n + sp.received, 0);
  s.expect(
    duplicates === 0,
    `no id was issued twice (${ids.toLocaleString("en-US")} ids in ${spaces.length} id space(s))`,
  );
  s.expect(
    undecodable === 0,
    "every id decodes as its mode's ids should (time, worker or shard, range)",
  );
  s.expect(
    decreases === 0,
    "ids from one process only increase (segment always; snowflake without backup worker ids)",
  );
  s.expect(malformed === 0 && ids > 0, "every successful answer held well-formed ids");
  const passed = failure === undefined && s.checks.every((c) => c.ok);
  return {
    ...base,
    status: passed ? "passed" : "failed",
    ...(failure !== undefined ? { failure } : {}),
    summary,
    durationMs: Math.round(performance.now() - started),
    ids,
    duplicates,
    undecodable,
    decreases,
    errors,
    longestNoId,
    checks: s.checks,
    notes: s.notes,
    phases: s.phases,
    stateChanges: s.changes,
    spaces,
    loops,
    servers: s.servers.map((p) => ({ label: p.label, starts: p.incarnation, log: p.logFile })),
  };
}

/** A scenario that failed half-way may leave a store stopped or paused: the next one needs it. */
async function restoreServices(ctx: RunContext): Promise<void> {
  const { mysql, zookeeper, redis } = ctx.services;
  for (const handle of [mysql, zookeeper, redis]) {
    if (!handle) continue;
    if (handle.running) handle.resume();
    else await handle.start();
  }
}

function empty() {
  return {
    summary: "",
    ids: 0,
    duplicates: 0,
    undecodable: 0,
    decreases: 0,
    errors: {},
    longestNoId: {},
    checks: [],
    notes: [],
    phases: [],
    stateChanges: [],
    spaces: [],
    loops: [],
    servers: [],
  };
}

/** Assembles the report of a run from its scenarios' reports. */
export function assemble(
  options: Pick<ChaosOptions, "form" | "command">,
  serverBuild: string,
  startedAt: Date,
  durationMs: number,
  scenarios: ScenarioReport[],
): ChaosReport {
  return {
    form: options.form,
    startedAt: startedAt.toISOString(),
    durationMs: Math.round(durationMs),
    command: options.command,
    machine: machineInfo(),
    serverBuild,
    ids: scenarios.reduce((n, s) => n + s.ids, 0),
    duplicates: scenarios.reduce((n, s) => n + s.duplicates, 0),
    passed: scenarios.filter((s) => s.status === "passed").length,
    failed: scenarios.filter((s) => s.status === "failed").length,
    notRun: scenarios.filter((s) => s.status === "not run").length,
    scenarios,
  };
}

/** Runs the chosen form, prints its table and writes its JSON report. */
export async function runChaos(options: ChaosOptions): Promise<ChaosReport> {
  const log = options.log ?? ((line: string) => console.error(line));
  const scenarios = selectScenarios(options.form, options.only);
  const shares = budgets(scenarios, options.totalIds);
  const startedAt = new Date();
  const t0 = performance.now();
  const serverBuild = serverBuildTime();
  const run = await openRun(scenarios, log);
  const reports: ScenarioReport[] = [];
  try {
    for (const [i, scenario] of scenarios.entries()) {
      reports.push(await runScenario(scenario, run.ctx, shares[i]!));
    }
  } finally {
    await run.dispose();
  }
  const report = assemble(options, serverBuild, startedAt, performance.now() - t0, reports);
  const file = writeReport(
    report,
    options.resultsDir,
    options.form === "full" ? "REPORT.json" : "REPORT-short.json",
  );
  console.log(reportText(report));
  console.log(`\nreport written to ${file}`);
  return report;
}
