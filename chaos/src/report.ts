// The report of a run: one entry per scenario (ids, errors with codes, duplicates, the longest time
// without an id, whether the processes behaved as documented), printed as a table and written as
// JSON (ids as decimal strings, never JSON numbers).
import { mkdirSync, writeFileSync } from "node:fs";
import { cpus, release, totalmem } from "node:os";
import { join } from "node:path";
import type { LoopReport } from "./load-driver";
import type { Check, PhaseReport, SpaceCheck, StateChange } from "./scenario-run";

/** The outcome of one scenario. */
export interface ScenarioReport {
  name: string;
  kind: string;
  title: string;
  documented: string;
  /** "passed": every check held, no duplicate, every id decoded and increased where it must. */
  status: "passed" | "failed" | "not run";
  /** Why the scenario failed to run to its end, or was not run. */
  failure?: string;
  /** What the processes did, in one line. */
  summary: string;
  budget: number;
  durationMs: number;
  ids: number;
  duplicates: number;
  undecodable: number;
  /** Ids not above the previous id of the same process, where ids must increase. */
  decreases: number;
  /** Failed requests by code, all loops together. */
  errors: Record<string, number>;
  /** Per mode: the longest any one client waited for an id, and which loop. */
  longestNoId: Record<
    string,
    { ms: number; loop: string; fromMs: number; toMs: number; recovered: boolean }
  >;
  checks: Check[];
  notes: string[];
  phases: PhaseReport[];
  stateChanges: StateChange[];
  spaces: SpaceCheck[];
  loops: LoopReport[];
  servers: Array<{ label: string; starts: number; log: string }>;
}

/** A whole run. */
export interface ChaosReport {
  form: "short" | "full";
  startedAt: string;
  durationMs: number;
  command: string;
  machine: { cpus: number; cpu: string; memoryGb: number; kernel: string; node: string };
  /** When the server CLI that was tested was built. */
  serverBuild: string;
  ids: number;
  duplicates: number;
  passed: number;
  failed: number;
  notRun: number;
  scenarios: ScenarioReport[];
}

/** What the machine is, for the README. */
export function machineInfo(): ChaosReport["machine"] {
  const list = cpus();
  return {
    cpus: list.length,
    cpu: list[0]?.model.trim() ?? "unknown",
    memoryGb: Math.round((totalmem() / 2 ** 30) * 10) / 10,
    kernel: release(),
    node: process.version,
  };
}

const MODE_NAMES: Record<string, string> = {
  segment: "segment",
  snowflake: "snowflake",
  redisSequence: "redis seq",
};

function formatMs(ms: number): string {
  return ms >= 1000 ? `${(ms / 1000).toFixed(1)} s` : `${Math.round(ms)} ms`;
}

function formatCount(n: number): string {
  return n.toLocaleString("en-US");
}

/** The table of a run, as Markdown (it is what the README quotes). */
export function reportTable(report: ChaosReport): string {
  const rows = [
    "| scenario | ids | duplicates | errors returned (code x count) | longest without an id (one client) | behaved as documented |",
    "|---|---:|---:|---|---|---|",
  ];
  for (const s of report.scenarios) {
    const errors =
      Object.entries(s.errors)
        .sort((a, b) => b[1] - a[1])
        .map(([code, n]) => `${code} x${formatCount(n)}`)
        .join(", ") || "none";
    const longest =
      Object.entries(s.longestNoId)
        .map(
          ([mode, l]) =>
            `${MODE_NAMES[mode] ?? mode} ${formatMs(l.ms)}${l.recovered ? "" : " (not recovered)"}`,
        )
        .join(", ") || "-";
    const failedCheck = s.checks.find((c) => !c.ok);
    const behaved =
      s.status === "passed"
        ? `yes: ${s.summary}`
        : s.status === "not run"
          ? `not run: ${s.failure ?? ""}`
          : `NO: ${failedCheck?.text ?? s.failure ?? "ids failed their checks"}`;
    rows.push(
      `| ${s.name} | ${formatCount(s.ids)} | ${s.duplicates} | ${errors} | ${longest} | ${behaved.replaceAll("|", "/")} |`,
    );
  }
  rows.push(
    `| **total** | **${formatCount(report.ids)}** | **${report.duplicates}** | | | ${report.passed} passed, ${report.failed} failed${report.notRun ? `, ${report.notRun} not run` : ""} |`,
  );
  return rows.join("\n");
}

/** The lines printed after a run: the table, the machine, failed checks in full. */
export function reportText(report: ChaosReport): string {
  const m = report.machine;
  const lines = [
    "",
    `Leaf chaos suite, ${report.form} form: \`${report.command}\``,
    `${report.startedAt}, ${formatMs(report.durationMs)}; ${m.cpus} x ${m.cpu}, ${m.memoryGb} GB, Linux ${m.kernel}, Node ${m.node}; server built ${report.serverBuild}`,
    "",
    reportTable(report),
    "",
  ];
  for (const s of report.scenarios) {
    const failed = s.checks.filter((c) => !c.ok);
    const idProblems = s.spaces.filter(
      (sp) => sp.duplicates > 0 || sp.undecodable > 0 || sp.serverDecodeMismatches > 0,
    );
    if (s.status === "passed" && failed.length === 0 && idProblems.length === 0) continue;
    lines.push(`${s.name}: ${s.status}${s.failure ? ` (${s.failure})` : ""}`);
    for (const c of failed) lines.push(`  failed: ${c.text}`);
    for (const sp of idProblems) {
      lines.push(
        `  ${sp.space}: ${sp.duplicates} duplicates ${sp.duplicateExamples.join(" ")}; ${sp.undecodable} undecodable ` +
          `${sp.undecodableExamples.join(" ")} (${sp.decodeRule}); ${sp.serverDecodeMismatches} server decode mismatches`,
      );
    }
    for (const l of s.loops.filter((x) => x.mustIncrease && x.decreases > 0)) {
      lines.push(
        `  ${l.label}: ${l.decreases} ids not above the previous one: ${l.decreaseExamples.join("; ")}`,
      );
    }
  }
  return lines.join("\n");
}

/** Writes the report as JSON into `dir` (created when missing); returns the file's path. */
export function writeReport(report: ChaosReport, dir: string, file: string): string {
  mkdirSync(dir, { recursive: true });
  const path = join(dir, file);
  writeFileSync(path, `${JSON.stringify(report, null, 2)}\n`);
  return path;
}
