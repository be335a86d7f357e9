// Recycle mode under a wall clock stepped forward, then the link to ZooKeeper cut: the holder issues
// nothing past the horizon its record last stored, which is where the next holder starts (issue 24,
// item 3). Normal mode, whose next holder is the same node restarting: the holder issues nothing
// past the issue floor of its last stored report.
import { fileURLToPath } from "node:url";
import { SnowflakeWorker } from "@leaf/core";
import { clockStepHandOver, clockStepRestart, spawnNode, started } from "@leaf/testkit";
import { describe, expect, it } from "vitest";
import { uniqueName, zkFixture } from "./helpers";
import { ONE_WORKER } from "./one-worker";

const HOLDER = fileURLToPath(new URL("./fixtures/clock-step-holder.ts", import.meta.url));
const RESTART_HOLDER = fileURLToPath(new URL("./fixtures/restart-holder.ts", import.meta.url));
const STEP_MS = 10_000;
const SESSION_MS = 2000;

const fx = zkFixture({ mode: "recycle", sessionTimeoutMs: SESSION_MS, peerClockCheck: false });

describe("recycle mode under a wall clock stepped forward", () => {
  it("issues no id past the stored horizon when the holder's clock steps forward and its link is cut", async () => {
    const name = uniqueName("clockstep");
    const options = { sessionTimeoutMs: SESSION_MS, peerClockCheck: false };
    // A write stored between the step and the cut puts the horizon in this clock's future.
    const registry = fx.registry({ clockToleranceMs: STEP_MS + 5000 });
    const result = await clockStepHandOver({
      storePort: fx.zk.port,
      spawnFirst: (address, env) =>
        spawnNode(HOLDER, [address, name, JSON.stringify(options)], { env }),
      startSecond: () =>
        started(
          new SnowflakeWorker({
            registry,
            node: { name, ip: "10.3.0.2", port: 8080 },
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
      leaseMs: SESSION_MS,
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
  });
});

describe("normal mode under a wall clock stepped forward", () => {
  it("issues no id past the last stored report's issue floor when the node is killed after a step and restarts", async () => {
    const name = uniqueName("steprestart");
    // No cache file: ZooKeeper is the only record the restart reads.
    const options = { cacheFile: false, peerClockCheck: false, sessionTimeoutMs: SESSION_MS };
    const result = await clockStepRestart({
      spawnHolder: (env) =>
        spawnNode(RESTART_HOLDER, [fx.zk.connectString, name, JSON.stringify(options)], { env }),
      timestampOf: (id) => ONE_WORKER.decompose(id).timestampMs,
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
