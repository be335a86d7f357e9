// A wall clock stepped forward after a renewal, then the link to etcd cut: the holder issues
// nothing past the horizon etcd last stored, which is where the next holder starts (issue 24, item
// 3).
import { fileURLToPath } from "node:url";
import { SnowflakeWorker } from "@leaf/core";
import {
  clockStepHandOver,
  type EtcdHandle,
  spawnNode,
  startEtcd,
  started,
  stopAll,
} from "@leaf/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { EtcdRegistry } from "../src/index";
import { ONE_WORKER, REGISTRY, TTL_SECONDS, WORKER } from "./fixtures/one-worker";

const HOLDER = fileURLToPath(new URL("./fixtures/clock-step-holder.ts", import.meta.url));
const STEP_MS = 10_000;

let etcd: EtcdHandle;

beforeAll(async () => {
  etcd = await startEtcd({ useEnv: false });
});

afterAll(async () => {
  await stopAll();
});

describe("registry-etcd under a wall clock stepped forward", () => {
  it("issues no id past the stored horizon when the holder's clock steps forward and its link is cut", async () => {
    const service = "clock-step";
    const registry = new EtcdRegistry({ url: etcd.url, ...REGISTRY });
    try {
      const result = await clockStepHandOver({
        storePort: etcd.port,
        spawnFirst: (address, env) => spawnNode(HOLDER, [`http://${address}`, service], { env }),
        startSecond: () =>
          started(
            new SnowflakeWorker({
              registry,
              node: { name: service, ip: "10.3.0.2", port: 8080 },
              layout: ONE_WORKER,
              reacquire: false,
              generator: { randomSequenceStart: 0 },
              // A renewal stored between the step and the cut puts the horizon in this clock's
              // future.
              startToleranceMs: STEP_MS + 5000,
              ...WORKER,
            }),
          ),
        timestampOf: (id) => ONE_WORKER.decompose(id).timestampMs,
        leaseMs: TTL_SECONDS * 1000,
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
