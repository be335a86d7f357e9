// A wall clock stepped forward after a renewal, then the link to Redis cut: the holder issues nothing
// past the horizon Redis last stored, which is where the next holder starts (issue 24, item 3).
import { fileURLToPath } from "node:url";
import { SnowflakeWorker } from "@leaf/core";
import {
  clockStepHandOver,
  type RedisHandle,
  spawnNode,
  started,
  startRedis,
  stopAll,
} from "@leaf/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { RedisRegistry, type RedisRegistryOptions } from "../src/index";
import { oneWorker } from "./holders";

const HOLDER = fileURLToPath(new URL("./fixtures/clock-step-holder.ts", import.meta.url));
const STEP_MS = 10_000;
const timings: RedisRegistryOptions = {
  leaseMs: 2000,
  safetyMarginMs: 400,
  renewIntervalMs: 400,
  commandTimeoutMs: 300,
};

let redis: RedisHandle;

beforeAll(async () => {
  redis = await startRedis({ useEnv: false });
});

afterAll(async () => {
  await stopAll();
});

describe("registry-redis under a wall clock stepped forward", () => {
  it("issues no id past the stored horizon when the holder's clock steps forward and its link is cut", async () => {
    const service = `clock-step-${process.pid}`;
    const registry = new RedisRegistry({
      url: redis.url,
      ...timings,
      // A renewal stored between the step and the cut puts the horizon in this clock's future.
      toleranceMs: STEP_MS + 5000,
    });
    try {
      const result = await clockStepHandOver({
        storePort: redis.port,
        spawnFirst: (address, env) =>
          spawnNode(HOLDER, [`redis://${address}`, service, JSON.stringify(timings)], { env }),
        startSecond: () =>
          started(
            new SnowflakeWorker({
              registry,
              node: { name: service, ip: "10.3.0.2", port: 8080 },
              layout: oneWorker,
              reacquire: false,
              generator: { randomSequenceStart: 0 },
              // A renewal stored between the step and the cut puts the horizon in this clock's future.
              startToleranceMs: STEP_MS + 5000,
              reportIntervalMs: 300,
              restartMarginMs: 200,
              firstReportDelayMs: 50,
            }),
          ),
        timestampOf: (id) => oneWorker.decompose(id).timestampMs,
        leaseMs: timings.leaseMs!,
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
