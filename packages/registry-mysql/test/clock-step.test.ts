// Lease mode under a wall clock stepped forward after a renewal, then the link to MariaDB cut: the
// holder issues nothing past the issue_horizon it last stored, which is where the next holder starts
// (issue 24, item 3). Fixed mode, whose next holder is the same node restarting: the holder issues
// nothing past the issue floor of its last stored report.
import { fileURLToPath } from "node:url";
import { layouts, SnowflakeWorker } from "@leaf/core";
import {
  clockStepHandOver,
  clockStepRestart,
  type MysqlHandle,
  spawnNode,
  started,
  startMysql,
  stopAll,
} from "@leaf/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createSchema, MysqlRegistry } from "../src/index";
import { ONE_WORKER } from "./one-worker";

const HOLDER = fileURLToPath(new URL("./fixtures/clock-step-holder.ts", import.meta.url));
const RESTART_HOLDER = fileURLToPath(new URL("./fixtures/restart-holder.ts", import.meta.url));
const STEP_MS = 10_000;
const timings = { leaseMs: 2500, safetyMarginMs: 500, renewIntervalMs: 500, queryTimeoutMs: 1000 };

let mysql: MysqlHandle;
let db: string;

beforeAll(async () => {
  mysql = await startMysql({ useEnv: false });
  db = await mysql.createDatabase("leaf_clock_step");
  await createSchema(mysql.urlFor(db), { mode: "lease" });
});

afterAll(async () => {
  await stopAll();
});

describe("registry-mysql lease mode under a wall clock stepped forward", () => {
  it("issues no id past the stored horizon when the holder's clock steps forward and its link is cut", async () => {
    const service = "clock-step";
    const registry = new MysqlRegistry({
      mode: "lease",
      url: mysql.urlFor(db),
      ...timings,
      // A renewal stored between the step and the cut puts the horizon in this clock's future.
      toleranceMs: STEP_MS + 5000,
    });
    try {
      const result = await clockStepHandOver({
        storePort: mysql.port,
        spawnFirst: (address, env) =>
          spawnNode(HOLDER, [`mysql://root@${address}/${db}`, service, JSON.stringify(timings)], {
            env,
          }),
        startSecond: () =>
          started(
            new SnowflakeWorker({
              registry,
              node: { name: service, ip: "10.3.0.2", port: 8080 },
              layout: ONE_WORKER,
              reacquire: false,
              generator: { randomSequenceStart: 0 },
              startToleranceMs: STEP_MS + 5000,
              reportIntervalMs: 300,
              restartMarginMs: 200,
              firstReportDelayMs: 50,
            }),
          ),
        timestampOf: (id) => ONE_WORKER.decompose(id).timestampMs,
        leaseMs: timings.leaseMs,
        stepMs: STEP_MS,
      });
      // The fault happened: the first holder read the stepped clock, and both issued ids.
      expect(result.firstClockMax).toBeGreaterThan(result.cutAt + STEP_MS / 2);
      expect(result.firstIds).toBeGreaterThan(1000);
      expect(result.secondIds).toBeGreaterThan(1000);
      expect(
        result.duplicates,
        `${result.duplicates} of ${result.firstIds + result.secondIds} ids issued twice`,
      ).toBe(0);
      expect(result.firstMaxTimestamp).toBeLessThan(result.secondMinTimestamp);
      expect(result.refusals).toContain("LEASE_LOST");
    } finally {
      await registry.close();
    }
  });
});

describe("registry-mysql fixed mode under a wall clock stepped forward", () => {
  it("issues no id past the last stored report's issue floor when the node is killed after a step and restarts", async () => {
    const fixedDb = await mysql.createDatabase("leaf_clock_step_fixed");
    await createSchema(mysql.urlFor(fixedDb), { mode: "fixed" });
    // No cache file: the row is the only record the restart reads.
    const options = { cacheDir: false };
    const result = await clockStepRestart({
      spawnHolder: (env) =>
        spawnNode(
          RESTART_HOLDER,
          [mysql.urlFor(fixedDb), "step-restart", JSON.stringify(options)],
          {
            env,
          },
        ),
      timestampOf: (id) => layouts.leaf.decompose(id).timestampMs,
      stepMs: 20_000,
      killAfterMs: 500,
    });
    // The fault happened: the first holder read the stepped clock, and both issued ids.
    expect(result.firstClockMax).toBeGreaterThan(result.steppedAt + 10_000);
    expect(result.firstIds).toBeGreaterThan(1000);
    expect(result.secondIds).toBeGreaterThan(1000);
    expect(
      result.duplicates,
      `${result.duplicates} of ${result.firstIds + result.secondIds} ids issued twice`,
    ).toBe(0);
    expect(result.firstMaxTimestamp).toBeLessThan(result.secondMinTimestamp);
    expect(result.refusals).toContain("LEASE_LOST");
  });
});
