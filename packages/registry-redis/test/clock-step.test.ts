// A wall clock stepped forward after a renewal, then the link to Redis cut: the holder issues nothing
// past the horizon Redis last stored, which is where the next holder starts (issue 24, item 3).
// And a holder whose clock stepped forward while Redis kept renewing it, then Redis restarted empty:
// the horizon Redis stores is capped at its own TIME + lease, where the quarantine's floor puts the
// next holder.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { SnowflakeWorker } from "@leaf/core";
import {
  ChildLines,
  clockStepHandOver,
  countRepeatedIds,
  FakeClock,
  IdLog,
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

describe("registry-redis under a wall clock stepped forward, then a data loss", () => {
  it("issues no id past Redis TIME + lease when the holder's clock runs ahead and Redis restarts empty", async () => {
    const service = `clock-loss-${process.pid}`;
    // Both holders accept a stored timestamp far ahead of their clock: only the cap keeps them apart.
    const options = { ...timings, toleranceMs: STEP_MS + 5000 };
    const dir = mkdtempSync(join(tmpdir(), "leaf-clock-loss-"));
    const clock = new FakeClock({ file: join(dir, "faketime.offset") });
    const child = spawnNode(HOLDER, [redis.url, service, JSON.stringify(options)], {
      env: clock.env(),
    });
    child.stderr?.on("data", (d) => process.stderr.write(`[first] ${d}`));
    const first = new ChildLines(child);
    const registry = new RedisRegistry({ url: redis.url, ...options });
    let second: SnowflakeWorker | undefined;
    try {
      await first.until((lines) => lines.some((l) => l.startsWith('{"ids"')), "the first's ids");
      await sleep(1500);
      // No cut: the holder keeps renewing with its stepped clock, then Redis loses everything.
      clock.set(STEP_MS);
      const steppedAt = Date.now();
      await sleep(1000);
      await redis.restart();
      second = await started(
        new SnowflakeWorker({
          registry,
          node: { name: service, ip: "10.3.0.2", port: 8080 },
          layout: oneWorker,
          reacquire: false,
          generator: { randomSequenceStart: 0 },
          startToleranceMs: STEP_MS + 5000,
          reportIntervalMs: 300,
          restartMarginMs: 200,
          firstReportDelayMs: 50,
        }),
      );
      const secondIds = new IdLog();
      // Past every timestamp the first holder could reach on its stepped clock before it fenced.
      const until = steppedAt + STEP_MS + timings.leaseMs! + 1000;
      while (Date.now() < until) {
        for (const id of second.nextIds(50)) secondIds.push(id);
        await sleep(1);
      }
      await second.close();
      second = undefined;
      await first.kill();
      const firstIds = new IdLog();
      let firstClockMax = 0;
      const refusals: string[] = [];
      for (const line of first.json<{ ids?: string[]; at?: number; refused?: string }>()) {
        for (const id of line.ids ?? []) firstIds.push(BigInt(id));
        if (line.refused) refusals.push(line.refused);
        firstClockMax = Math.max(firstClockMax, line.at ?? 0);
      }
      // The fault happened: the first holder read the stepped clock, and both issued ids.
      expect(firstClockMax).toBeGreaterThan(steppedAt + STEP_MS / 2);
      expect(firstIds.count).toBeGreaterThan(1000);
      expect(secondIds.count).toBeGreaterThan(1000);
      const counted = countRepeatedIds([firstIds, secondIds], 5);
      expect(
        counted.duplicates,
        `${counted.duplicates} of ${firstIds.count + secondIds.count} ids issued twice`,
      ).toBe(0);
      expect(refusals).toContain("LEASE_LOST");
    } finally {
      await second?.close().catch(() => {});
      const pid = first.child.pid;
      await first.kill();
      if (pid !== undefined) clock.cleanUp(pid);
      await registry.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
