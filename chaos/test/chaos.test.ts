// The short form of the fault suite, as CI runs it: one scenario of each kind of fault, with real
// server processes, MariaDB, ZooKeeper and Redis, and small id counts. Each scenario must issue no
// id twice and behave as the packages document. The full form is `pnpm test:chaos`.
import { fileURLToPath } from "node:url";
import { stopAll } from "@leaf/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  assemble,
  budgets,
  openRun,
  type RunContext,
  reportText,
  runScenario,
  type ScenarioReport,
  scenariosOf,
  serverBuildTime,
  writeReport,
} from "../src/index";

const SHORT_FORM_IDS = 120_000;
const scenarios = scenariosOf("short");
const shares = budgets(scenarios, SHORT_FORM_IDS);
const reports: ScenarioReport[] = [];
const startedAt = new Date();
const t0 = performance.now();
const serverBuild = serverBuildTime();
let run: { ctx: RunContext; dispose(): Promise<void> } | undefined;

beforeAll(async () => {
  // Progress goes straight to stderr: vitest would put a header above every console line.
  run = await openRun(scenarios, (line) => process.stderr.write(`${line}\n`));
});

afterAll(async () => {
  try {
    if (reports.length > 0) {
      const report = assemble(
        { form: "short", command: "pnpm --filter @leaf/chaos test" },
        serverBuild,
        startedAt,
        performance.now() - t0,
        reports,
      );
      writeReport(
        report,
        fileURLToPath(new URL("../results", import.meta.url)),
        "REPORT-short.json",
      );
      console.log(reportText(report));
    }
  } finally {
    await run?.dispose();
    await stopAll();
  }
});

describe("the fault suite, short form", () => {
  it("runs one scenario of every kind of fault", () => {
    expect(new Set(scenarios.map((s) => s.kind))).toEqual(
      new Set(["process", "MariaDB", "ZooKeeper", "Redis", "clock", "network"]),
    );
  });

  for (const [i, scenario] of scenarios.entries()) {
    it(`issues no id twice and behaves as documented under ${scenario.name}: ${scenario.title}`, async () => {
      const report = await runScenario(scenario, run!.ctx, shares[i]!);
      reports.push(report);
      expect(report.failure, "the scenario ran to its end").toBeUndefined();
      expect(report.ids, "ids were issued").toBeGreaterThan(0);
      expect(report.duplicates, "duplicate ids").toBe(0);
      expect(report.undecodable, "ids that do not decode").toBe(0);
      expect(report.decreases, "ids that did not increase per process").toBe(0);
      expect(
        report.checks.filter((c) => !c.ok).map((c) => c.text),
        "failed behaviour checks",
      ).toEqual([]);
      expect(report.status).toBe("passed");
    }, 300_000);
  }
});
