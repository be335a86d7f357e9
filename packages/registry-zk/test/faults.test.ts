// ZooKeeper broken on purpose while generators run: stopped and restarted, paused past the session
// timeout (a hung server or a network stall), a holder process killed. Each test has this file's
// private server to itself.
import { performance } from "node:perf_hooks";
import {
  defineLayout,
  ErrorCodes,
  isLeafError,
  layouts,
  SnowflakeGenerator,
  type SnowflakeWorkerEvent,
  startSnowflakeWorker,
  type WorkerLease,
} from "@leaf/core";
import { ChildLines, spawnNode, startZookeeper, type ZookeeperHandle } from "@leaf/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ZookeeperRegistry } from "../src/index";
import { ACQUIRER, Admin, nodeOf, testOptions, uniqueName, waitUntil } from "./helpers";

/** Two worker ids: 0 and 1. */
const twoIds = defineLayout({ ...layouts.leaf, name: "two-ids", workerBits: 1, sequenceBits: 21 });

let zk: ZookeeperHandle;

beforeAll(async () => {
  zk = await startZookeeper({ tickTime: 500, useEnv: false });
});

afterAll(async () => {
  await zk?.dispose();
});

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Issues ids every 20 ms into `ids`, counting refusals; returns a stop function. */
function keepIssuing(next: () => bigint, ids: bigint[], refused: unknown[]): () => void {
  const timer = setInterval(() => {
    for (let i = 0; i < 50; i++) {
      try {
        ids.push(next());
      } catch (error) {
        refused.push(error);
        return;
      }
    }
  }, 20);
  return () => clearInterval(timer);
}

describe("ZooKeeper stopped and restarted", () => {
  it("stops a normal-mode generator while ZooKeeper is down and resumes it under the same id once the marker is back", async () => {
    const name = uniqueName("restart");
    const registry = new ZookeeperRegistry(
      testOptions(zk.connectString, { sessionTimeoutMs: 2000, connectTimeoutMs: 1000 }),
    );
    const events: Array<SnowflakeWorkerEvent & { at: number }> = [];
    const worker = await startSnowflakeWorker({
      registry,
      node: nodeOf(name, 0),
      reportIntervalMs: 300,
      firstReportDelayMs: 100,
      onEvent: (event) => events.push({ ...event, at: Date.now() }),
    });
    const workerId = worker.lease!.workerId;
    const ids: bigint[] = [];
    const refused: unknown[] = [];
    const stop = keepIssuing(() => worker.nextId(), ids, refused);
    try {
      await waitUntil(() => events.some((e) => e.type === "reported"), 5_000, "a first report");
      await zk.stop();
      // Past the silence limit the marker may be gone: ids stop, the lease itself is not lost.
      await waitUntil(() => refused.length > 0, 10_000, "ids to stop");
      const issuedBeforeOutage = ids.length;
      await sleep(2_500);
      expect(ids.length).toBe(issuedBeforeOutage);
      expect(refused.every((e) => isLeafError(e, ErrorCodes.LEASE_LOST))).toBe(true);
      expect(worker.state).toBe("held");
      await zk.start();
      const restartedAt = Date.now();
      await waitUntil(() => ids.length > issuedBeforeOutage, 15_000, "ids to resume");
      // A report pending during the outage may land just after the restart with an older value;
      // wait for one taken after it.
      await waitUntil(
        () => events.some((e) => e.type === "reported" && e.timestamp >= restartedAt),
        15_000,
        "a report after the restart",
      );
      expect(worker.state).toBe("held");
      expect(worker.lease!.workerId).toBe(workerId);
      expect(new Set(ids).size).toBe(ids.length);
      const admin = await Admin.connect(zk.connectString);
      try {
        const [child] = await admin.children(`/snowflake/${name}/forever`);
        const stored = JSON.parse(
          (await admin.getData(`/snowflake/${name}/forever/${child}`)).data,
        );
        expect(stored.timestamp).toBeGreaterThanOrEqual(restartedAt);
        // The marker is back, held by the new session.
        expect(await admin.exists(`/snowflake/${name}/temporary/10.1.0.1:8080`)).toBe(true);
      } finally {
        admin.close();
      }
    } finally {
      stop();
      await worker.close();
      await registry.close();
    }
  });

  it("starts from the cache file while ZooKeeper is down and reports to it once it is back", async () => {
    const name = uniqueName("cached");
    const options = testOptions(zk.connectString, { connectTimeoutMs: 1_000 });
    const node = nodeOf(name, 0);
    const first = new ZookeeperRegistry(options);
    const lease = await first.acquire({ node, maxWorkerId: 1023 });
    const reported = Date.now();
    await lease.report(reported);
    await lease.release();
    await first.close();

    await zk.stop();
    const second = new ZookeeperRegistry(options);
    try {
      const cached = await second.acquire({ node, maxWorkerId: 1023 });
      expect(cached.workerId).toBe(lease.workerId);
      expect(cached.lastTimestamp).toBe(reported);
      const later = Date.now();
      await expect(cached.report(later)).rejects.toMatchObject({ code: ErrorCodes.UNAVAILABLE });
      await zk.start();
      await cached.report(later + 1);
      const admin = await Admin.connect(zk.connectString);
      try {
        const [child] = await admin.children(`/snowflake/${name}/forever`);
        expect(child).toBe(`10.1.0.1:8080-${String(lease.workerId).padStart(10, "0")}`);
        const stored = JSON.parse(
          (await admin.getData(`/snowflake/${name}/forever/${child}`)).data,
        );
        expect(stored.timestamp).toBe(later + 1);
        expect(await admin.exists(`/snowflake/${name}/temporary/10.1.0.1:8080`)).toBe(true);
      } finally {
        admin.close();
      }
      await cached.release();
    } finally {
      await second.close();
    }
  });
});

describe("ZooKeeper session expiry in recycle mode", () => {
  it("fences the generator while the server is paused, before the id can be taken, and recovers with a fresh lease", async () => {
    const name = uniqueName("expiry");
    const sessionTimeoutMs = 2_000;
    const options = testOptions(zk.connectString, { mode: "recycle", sessionTimeoutMs });
    const registryA = new ZookeeperRegistry(options);
    const events: Array<SnowflakeWorkerEvent & { at: number }> = [];
    const worker = await startSnowflakeWorker({
      registry: registryA,
      node: nodeOf(name, 0),
      layout: twoIds,
      reportIntervalMs: 200,
      firstReportDelayMs: 50,
      onEvent: (event) => events.push({ ...event, at: performance.now() }),
    });
    const firstLease = worker.lease!;
    expect(firstLease.workerId).toBe(0);
    const idsA: bigint[] = [];
    const refused: unknown[] = [];
    const stop = keepIssuing(() => worker.nextId(), idsA, refused);
    const registryB = new ZookeeperRegistry(options);
    let leaseB: WorkerLease | undefined;
    try {
      await waitUntil(() => events.some((e) => e.type === "reported"), 5_000, "a first report");
      zk.pause();
      const pausedAt = performance.now();
      await waitUntil(() => firstLease.lost.aborted, 10_000, "the lease to be lost");
      const fencedAt = performance.now();
      expect(worker.state).toBe("fenced");
      let fenceError: unknown;
      try {
        worker.nextId();
      } catch (error) {
        fenceError = error;
      }
      expect(isLeafError(fenceError, ErrorCodes.LEASE_LOST)).toBe(true);
      expect((fenceError as { leafCode?: number }).leafCode).toBe(-4);
      // Another node wants an id while the server hangs; keep the server paused past the timeout.
      const takeB = (async () => {
        for (;;) {
          try {
            return await registryB.acquire({ node: nodeOf(name, 1), maxWorkerId: 1 });
          } catch (error) {
            if (!isLeafError(error)) throw error;
            await sleep(200);
          }
        }
      })();
      await sleep(Math.max(0, sessionTimeoutMs + 1_000 - (performance.now() - pausedAt)));
      const resumedAt = performance.now();
      zk.resume();
      leaseB = await takeB;
      // Fenced while nothing could be granted: the server was still paused.
      expect(fencedAt).toBeLessThan(resumedAt);
      await waitUntil(() => worker.state === "held", 20_000, "a fresh lease");
      const secondLease = worker.lease!;
      expect(secondLease).not.toBe(firstLease);
      expect(secondLease.lost.aborted).toBe(false);
      expect(secondLease.workerId).not.toBe(leaseB.workerId);
      const lastReportA = Math.max(
        ...events
          .filter((e) => e.type === "reported")
          .map((e) => (e as { timestamp: number }).timestamp),
      );
      const holderOfZero = leaseB.workerId === 0 ? leaseB : secondLease;
      expect(holderOfZero.lastTimestamp).toBeGreaterThanOrEqual(lastReportA);
      // No id repeats across A before and after the loss and B.
      const idsAfter: bigint[] = [];
      for (let i = 0; i < 1000; i++) idsAfter.push(worker.nextId());
      const generatorB = new SnowflakeGenerator({
        workerId: leaseB.workerId,
        layout: twoIds,
        lastTimestamp: leaseB.lastTimestamp,
        backups: leaseB.backups,
      });
      const idsB = generatorB.nextIds(1000);
      const all = [...idsA, ...idsAfter, ...idsB];
      expect(new Set(all).size).toBe(all.length);
    } finally {
      stop();
      await worker.close();
      await leaseB?.release();
      await registryA.close();
      await registryB.close();
    }
  });

  it("reuses a killed holder's id only after its session expired, after its last report", async () => {
    const name = uniqueName("killed");
    const holder = spawnNode(ACQUIRER, [zk.connectString, name, "0"]);
    const registry = new ZookeeperRegistry(testOptions(zk.connectString, { mode: "recycle" }));
    try {
      const reader = new ChildLines(holder);
      expect(await reader.next()).toBe("ready");
      holder.stdin!.write("go\n");
      expect(JSON.parse(await reader.next())).toMatchObject({ recycle: 0 });
      const reported = Date.now() + 50;
      holder.stdin!.write(`report ${reported}\n`);
      expect(await reader.next()).toBe("reported");
      holder.kill("SIGKILL");
      await new Promise((resolve) => holder.once("exit", resolve));
      const node = nodeOf(`${name}recycle`, 1);
      // Its session (4 s) outlives the process: the only id stays taken until the server expires it.
      await expect(registry.acquire({ node, maxWorkerId: 0 })).rejects.toMatchObject({
        code: ErrorCodes.WORKER_IDS_EXHAUSTED,
      });
      let lease: WorkerLease | undefined;
      const deadline = Date.now() + 15_000;
      while (!lease && Date.now() < deadline) {
        lease = await registry.acquire({ node, maxWorkerId: 0 }).catch(async (error) => {
          if (!isLeafError(error, ErrorCodes.WORKER_IDS_EXHAUSTED)) throw error;
          await sleep(250);
          return undefined;
        });
      }
      expect(lease?.workerId).toBe(0);
      expect(lease?.lastTimestamp).toBe(reported);
      await lease?.release();
    } finally {
      if (holder.exitCode === null) holder.kill("SIGKILL");
      await registry.close();
    }
  });
});
