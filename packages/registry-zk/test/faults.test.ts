// ZooKeeper broken on purpose while generators run: stopped and restarted, paused past the session
// timeout (a hung server or a network stall), a holder process killed. Each test has this file's
// private server to itself.
import {
  mkdirSync,
  mkdtempSync,
  readdirSync,
  rmSync,
  statSync,
  utimesSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import {
  defineLayout,
  ErrorCodes,
  isLeafError,
  layouts,
  SnowflakeGenerator,
  SnowflakeWorker,
  type SnowflakeWorkerEvent,
  type WorkerLease,
} from "@leaf/core";
import { readLeaseCache, writeLeaseCache } from "@leaf/core/adapter";
import {
  ChildLines,
  spawnNode,
  started,
  startZookeeper,
  type ZookeeperHandle,
} from "@leaf/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ZookeeperRegistry, type ZookeeperRegistryOptions } from "../src/index";
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

/** The ZooKeeper session (ephemeral owner) that holds `name`'s marker for node 0, or undefined. */
async function markerOwner(name: string): Promise<string | undefined> {
  const admin = await Admin.connect(zk.connectString);
  try {
    const path = `/snowflake/${name}/temporary/10.1.0.1:8080`;
    if (!(await admin.exists(path))) return undefined;
    return (await admin.getData(path)).stat.ephemeralOwner.toString("hex");
  } finally {
    admin.close();
  }
}

/** The timestamp stored in `name`'s forever node (one ip:port). */
async function storedTimestamp(name: string): Promise<number> {
  const admin = await Admin.connect(zk.connectString);
  try {
    const [child] = await admin.children(`/snowflake/${name}/forever`);
    return JSON.parse((await admin.getData(`/snowflake/${name}/forever/${child}`)).data).timestamp;
  } finally {
    admin.close();
  }
}

describe("ZooKeeper stopped and restarted", () => {
  it("keeps a normal-mode generator issuing through an outage longer than the session (default, as Java Leaf), and its reports resume after the restart", async () => {
    const name = uniqueName("restart");
    const registry = new ZookeeperRegistry(
      testOptions(zk.connectString, { sessionTimeoutMs: 2000, connectTimeoutMs: 1000 }),
    );
    const events: Array<SnowflakeWorkerEvent & { at: number }> = [];
    const worker = await started(
      new SnowflakeWorker({
        registry,
        node: nodeOf(name, 0),
        reportIntervalMs: 300,
        firstReportDelayMs: 100,
        onEvent: (event) => events.push({ ...event, at: Date.now() }),
      }),
    );
    const workerId = worker.lease!.workerId;
    const ids: bigint[] = [];
    const refused: unknown[] = [];
    const stop = keepIssuing(() => worker.nextId(), ids, refused);
    try {
      await waitUntil(() => events.some((e) => e.type === "reported"), 5_000, "a first report");
      const ownerBefore = await markerOwner(name);
      expect(ownerBefore).toBeDefined();
      await zk.stop();
      // Well past the session timeout (2 s) and the silence limit: the session is gone, the fixed
      // id is not, and ids keep flowing.
      await sleep(3_000);
      const pastSession = ids.length;
      await sleep(1_000);
      expect(ids.length).toBeGreaterThan(pastSession);
      expect(refused).toEqual([]);
      expect(events.some((e) => e.type === "report-failed")).toBe(true);
      await zk.start();
      const restartedAt = Date.now();
      // A report pending during the outage may land just after the restart with an older value;
      // wait for one taken after it.
      await waitUntil(
        () => events.some((e) => e.type === "reported" && e.timestamp >= restartedAt),
        15_000,
        "a report after the restart",
      );
      expect(worker.state).toBe("held");
      expect(worker.lease!.workerId).toBe(workerId);
      expect(refused).toEqual([]);
      expect(new Set(ids).size).toBe(ids.length);
      expect(await storedTimestamp(name)).toBeGreaterThanOrEqual(restartedAt);
      // The marker is back, held by a new session: the old one did not survive the outage.
      const ownerAfter = await markerOwner(name);
      expect(ownerAfter).toBeDefined();
      expect(ownerAfter).not.toBe(ownerBefore);
    } finally {
      stop();
      await worker.close();
      await registry.close();
    }
  });

  it("with stopWithoutSession, stops a normal-mode generator while ZooKeeper is down and resumes it under the same id once the marker is back", async () => {
    const name = uniqueName("strict");
    const registry = new ZookeeperRegistry(
      testOptions(zk.connectString, {
        sessionTimeoutMs: 2000,
        connectTimeoutMs: 1000,
        stopWithoutSession: true,
      }),
    );
    const events: Array<SnowflakeWorkerEvent & { at: number }> = [];
    const worker = await started(
      new SnowflakeWorker({
        registry,
        node: nodeOf(name, 0),
        reportIntervalMs: 300,
        firstReportDelayMs: 100,
        onEvent: (event) => events.push({ ...event, at: Date.now() }),
      }),
    );
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
      await waitUntil(
        () => events.some((e) => e.type === "reported" && e.timestamp >= restartedAt),
        15_000,
        "a report after the restart",
      );
      expect(worker.state).toBe("held");
      expect(worker.lease!.workerId).toBe(workerId);
      expect(new Set(ids).size).toBe(ids.length);
      expect(await storedTimestamp(name)).toBeGreaterThanOrEqual(restartedAt);
      expect(await markerOwner(name)).toBeDefined();
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

describe("Java Leaf's cache file, ZooKeeper down at start", () => {
  /** Writes Java Leaf's `workerID.properties` as it does (no newline), last modified at `mtime`. */
  function writeJavaCache(tmp: string, name: string, text: string, mtime: number): string {
    const dir = join(tmp, name, "leafconf", "8080");
    mkdirSync(dir, { recursive: true });
    const path = join(dir, "workerID.properties");
    writeFileSync(path, text);
    utimesSync(path, mtime / 1000, mtime / 1000);
    return path;
  }

  it("starts a migrating node from {tmpdir}/{name}/leafconf/{port}/workerID.properties, checked against its last write, and writes its own cache", async () => {
    const tmp = mkdtempSync(join(tmpdir(), "leaf-zk-java-tmpdir-"));
    const savedTmpdir = process.env.TMPDIR;
    const node = nodeOf(uniqueName("javacache"), 0);
    // The tree Java Leaf left: this ip:port's forever node, worker id 7, reported a minute ago.
    const admin = await Admin.connect(zk.connectString);
    try {
      await admin.mkdirp(`/snowflake/${node.name}/forever`);
      await admin.create(
        `/snowflake/${node.name}/forever/10.1.0.1:8080-0000000007`,
        JSON.stringify({ ip: "10.1.0.1", port: "8080", timestamp: Date.now() - 60_000 }),
      );
    } finally {
      admin.close();
    }
    // Defaults for both cache files: under os.tmpdir(), here the test's own folder.
    const offline = (extra: Partial<ZookeeperRegistryOptions> = {}) =>
      new ZookeeperRegistry({
        ...testOptions(zk.connectString, { connectTimeoutMs: 1_000 }),
        cacheFile: undefined,
        ...extra,
      });
    const registries: ZookeeperRegistry[] = [];
    const attempt = async (
      name: string,
      extra: Partial<ZookeeperRegistryOptions> = {},
      backups = 0,
    ) => {
      const registry = offline(extra);
      registries.push(registry);
      try {
        return await registry.acquire({ node: { ...node, name }, maxWorkerId: 1023, backups });
      } catch (error) {
        return error;
      }
    };
    process.env.TMPDIR = tmp;
    await zk.stop();
    try {
      const writtenAt = Date.now() - 60_000;
      const javaPath = writeJavaCache(tmp, node.name, "workerID=7", writtenAt);
      expect(javaPath).toBe(join(tmp, node.name, "leafconf", "8080", "workerID.properties"));

      // The file was written in the future (the clock is behind Java Leaf's last start): refused.
      const aheadName = uniqueName("javaahead");
      const aheadPath = writeJavaCache(tmp, aheadName, "workerID=7", Date.now() + 3_600_000);
      const ahead = await attempt(aheadName);
      expect(isLeafError(ahead, ErrorCodes.CLOCK_BEHIND_LEASE), String(ahead)).toBe(true);
      expect((ahead as Error).message).toContain(aheadPath);

      // Not what Java Leaf writes: refused, naming the file and the value.
      const brokenName = uniqueName("javabroken");
      const brokenPath = writeJavaCache(tmp, brokenName, "workerID=seven", writtenAt);
      const broken = await attempt(brokenName);
      expect(isLeafError(broken, ErrorCodes.CORRUPT_DATA), String(broken)).toBe(true);
      expect((broken as Error).message).toContain(brokenPath);
      expect((broken as Error).message).toContain('"seven"');

      // Java Leaf has no backup ids.
      const backups = await attempt(node.name, {}, 1);
      expect(isLeafError(backups, ErrorCodes.UNAVAILABLE), String(backups)).toBe(true);
      expect((backups as Error).message).toContain("backup");

      // Switched off: no fallback.
      const off = await attempt(node.name, { javaCacheFile: false });
      expect(isLeafError(off, ErrorCodes.UNAVAILABLE), String(off)).toBe(true);
      expect((off as Error).message).toContain("no cache file");

      // This package's own cache file, when present, wins over Java Leaf's.
      const ownName = uniqueName("javaown");
      writeJavaCache(tmp, ownName, "workerID=7", writtenAt);
      writeLeaseCache(join(tmp, ownName, "registry-zk", "8080", "workerID.json"), {
        node: { ...node, name: ownName },
        workerId: 3,
        timestamp: writtenAt,
        registry: "zk",
      });
      const own = (await attempt(ownName)) as WorkerLease;
      expect(own.workerId).toBe(3);

      // The migrating node: Java Leaf's id, issuing after the file's last write.
      const lease = (await attempt(node.name)) as WorkerLease;
      expect(lease.workerId, String(lease)).toBe(7);
      expect(lease.lastTimestamp).toBe(Math.floor(statSync(javaPath).mtimeMs));
      // Its own cache file is written at once, with a timestamp, beside Java Leaf's folder: that
      // folder keeps only Java Leaf's own file.
      const ours = readLeaseCache(join(tmp, node.name, "registry-zk", "8080", "workerID.json"));
      expect(readdirSync(join(tmp, node.name, "leafconf", "8080"))).toEqual([
        "workerID.properties",
      ]);
      expect(ours).toMatchObject({ workerId: 7, node: { ip: "10.1.0.1", port: 8080 } });
      expect(ours!.timestamp).toBeGreaterThanOrEqual(lease.lastTimestamp);
      const reportedOffline = Date.now();
      await expect(lease.report(reportedOffline)).rejects.toMatchObject({
        code: ErrorCodes.UNAVAILABLE,
      });
      expect(
        readLeaseCache(join(tmp, node.name, "registry-zk", "8080", "workerID.json"))!.timestamp,
      ).toBe(reportedOffline);

      // ZooKeeper is back: the lease finds the same id in Java Leaf's tree and reports there.
      await zk.start();
      const reported = Date.now();
      await lease.report(reported);
      expect(await storedTimestamp(node.name)).toBe(reported);
      expect(await markerOwner(node.name)).toBeDefined();
      await lease.release();
    } finally {
      if (savedTmpdir === undefined) delete process.env.TMPDIR;
      else process.env.TMPDIR = savedTmpdir;
      await zk.start();
      for (const registry of registries) await registry.close();
      rmSync(tmp, { recursive: true, force: true });
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
    const worker = await started(
      new SnowflakeWorker({
        registry: registryA,
        node: nodeOf(name, 0),
        layout: twoIds,
        reportIntervalMs: 200,
        firstReportDelayMs: 50,
        onEvent: (event) => events.push({ ...event, at: performance.now() }),
      }),
    );
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
      // Reports of the first lease only: the fresh lease reports too, under another id.
      const lastReportA = Math.max(
        ...events
          .filter((e) => e.type === "reported" && e.at < fencedAt)
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
      // It may have issued ids up to the horizon its record holds (its clock + silenceLimitMs).
      const admin = await Admin.connect(zk.connectString);
      const record = JSON.parse(
        (await admin.getData(`/snowflake/${name}recycle/recycle/workers/0`)).data,
      );
      admin.close();
      expect(record.horizon).toBeGreaterThan(reported - 1000);
      const node = nodeOf(`${name}recycle`, 1);
      // Its session (4 s) outlives the process: the only id stays taken until the server expires
      // it.
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
      expect(lease?.lastTimestamp).toBe(Math.max(reported, record.horizon));
      await lease?.release();
    } finally {
      if (holder.exitCode === null) holder.kill("SIGKILL");
      await registry.close();
    }
  });
});
