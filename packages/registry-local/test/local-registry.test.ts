// LocalRegistry in one process: configuration, the start check against the cache file, what the
// cache file holds, and one holder per worker id.
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readlinkSync,
  rmSync,
  unlinkSync,
  writeFileSync,
} from "node:fs";
import { hostname, tmpdir } from "node:os";
import { join } from "node:path";
import { ErrorCodes, isLeafError, LeafError, ManualClock } from "@leaf/core";
import { readLeaseCache } from "@leaf/core/adapter";
import { afterAll, describe, expect, it } from "vitest";
import { LocalRegistry, parseWorkIdMap } from "../src/index";

const root = mkdtempSync(join(tmpdir(), "leaf-local-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));
let dirs = 0;
const freshDir = () => join(root, `d${dirs++}`);
const node = (ip = "10.1.46.33", port = 8080) => ({ name: "orders", ip, port });

async function rejection(promise: Promise<unknown>): Promise<LeafError> {
  try {
    await promise;
  } catch (error) {
    if (error instanceof LeafError) return error;
    throw error;
  }
  throw new Error("expected a rejection");
}

function thrown(fn: () => unknown): LeafError {
  try {
    fn();
  } catch (error) {
    if (error instanceof LeafError) return error;
    throw error;
  }
  throw new Error("expected an error");
}

describe("configuration", () => {
  it("reads the fork's workIdMap as JSON text, with ids as numbers or strings", async () => {
    const registry = new LocalRegistry({
      workIdMap: '{"10.1.46.33:8080":1,"10.1.46.33:8081":"2"}',
      dir: freshDir(),
    });
    const a = await registry.acquire({ node: node("10.1.46.33", 8080), maxWorkerId: 1023 });
    const b = await registry.acquire({ node: node("10.1.46.33", 8081), maxWorkerId: 1023 });
    expect([a.workerId, b.workerId]).toEqual([1, 2]);
    await a.release();
    await b.release();
  });

  it("names the node and the map's entries when this node is not in the map", async () => {
    const registry = new LocalRegistry({ workIdMap: { "10.1.46.33:8080": 1 }, dir: freshDir() });
    const error = await rejection(
      registry.acquire({ node: node("10.1.46.34", 9090), maxWorkerId: 1023 }),
    );
    expect(error.code).toBe(ErrorCodes.INVALID_CONFIG);
    expect(error.message).toContain("10.1.46.34:9090 is not in workIdMap");
    expect(error.message).toContain("10.1.46.33:8080");
  });

  it("rejects a map that is not JSON, a key without a port, a negative id, or an id given twice", () => {
    expect(thrown(() => parseWorkIdMap("{10.1.46.33:8080: 1}")).message).toContain("JSON text");
    expect(thrown(() => parseWorkIdMap({ "10.1.46.33": 1 })).message).toContain('"ip:port"');
    expect(thrown(() => parseWorkIdMap({ "10.1.46.33:8080": -1 })).message).toContain(
      "an integer of 0 or more",
    );
    const twice = thrown(() => parseWorkIdMap({ "10.0.0.1:8080": 3, "10.0.0.2:8080": [4, 3] }));
    expect(twice.code).toBe(ErrorCodes.INVALID_CONFIG);
    expect(twice.message).toContain("worker id 3 is also given to 10.0.0.1:8080");
  });

  it("requires exactly one of workerId and workIdMap", () => {
    expect(thrown(() => new LocalRegistry({ dir: freshDir() })).code).toBe(
      ErrorCodes.INVALID_CONFIG,
    );
    expect(
      thrown(() => new LocalRegistry({ workerId: 1, workIdMap: { "1.2.3.4:1": 1 } })).message,
    ).toContain("exactly one of them");
  });

  it("refuses a staleAfterMs that is not an integer of at least 100 ms with INVALID_CONFIG", () => {
    for (const staleAfterMs of [0, 99, 1.5, -100, Number.NaN]) {
      const error = thrown(() => new LocalRegistry({ workerId: 1, staleAfterMs }));
      expect(error.code).toBe(ErrorCodes.INVALID_CONFIG);
      expect(error.message).toContain("staleAfterMs");
      expect(error.message).toContain("at least 100");
    }
  });

  it("refuses a configured worker id outside the layout's range", async () => {
    const registry = new LocalRegistry({ workerId: 1500, dir: freshDir() });
    const error = await rejection(registry.acquire({ node: node(), maxWorkerId: 1023 }));
    expect(error.code).toBe(ErrorCodes.WORKER_IDS_EXHAUSTED);
    expect(error.message).toContain("worker id 1500");
    expect(error.message).toContain("0..1023");
  });

  it("names the folder when the lock folder cannot be used", async () => {
    const file = join(root, "a-file");
    writeFileSync(file, "");
    const registry = new LocalRegistry({ workerId: 1, dir: join(file, "below") });
    const error = await rejection(registry.acquire({ node: node(), maxWorkerId: 1023 }));
    expect(error.code).toBe(ErrorCodes.INVALID_CONFIG);
    expect(error.message).toContain(join(file, "below"));
    expect(error.message).toContain("ENOTDIR");
  });

  it("refuses more backup ids than the configuration lists", async () => {
    const registry = new LocalRegistry({ workerId: [4, 5], dir: freshDir() });
    const error = await rejection(
      registry.acquire({ node: node(), maxWorkerId: 1023, backups: 2 }),
    );
    expect(error.code).toBe(ErrorCodes.WORKER_IDS_EXHAUSTED);
    expect(error.message).toContain("2 backup worker id(s) requested");
    const lease = await registry.acquire({ node: node(), maxWorkerId: 1023, backups: 1 });
    expect(lease.backups.map((b) => b.workerId)).toEqual([5]);
    await lease.release();
  });
});

describe("the cache file", () => {
  it("refuses to start when the cached timestamp is ahead of the clock, showing both times", async () => {
    const dir = freshDir();
    const clock = new ManualClock(Date.UTC(2026, 0, 1));
    const first = await new LocalRegistry({ workerId: 3, dir, clock }).acquire({
      node: node(),
      maxWorkerId: 1023,
    });
    const reported = clock.now() + 60_000;
    await first.release(reported);
    const registry = new LocalRegistry({ workerId: 3, dir, clock, toleranceMs: 5 });
    const error = await rejection(registry.acquire({ node: node(), maxWorkerId: 1023 }));
    expect(error.code).toBe(ErrorCodes.CLOCK_BEHIND_LEASE);
    expect(error.message).toContain(new Date(clock.now()).toISOString());
    expect(error.message).toContain(new Date(reported).toISOString());
    expect(error.message).toContain("worker-3.json");
    // The refused acquire does not keep the id locked.
    clock.set(reported + 1);
    const again = await registry.acquire({ node: node(), maxWorkerId: 1023 });
    expect(again.lastTimestamp).toBe(reported);
    await again.release();
  });

  it("starts when the clock is behind the cached timestamp by no more than the tolerance", async () => {
    const dir = freshDir();
    const clock = new ManualClock(Date.UTC(2026, 0, 1));
    const first = await new LocalRegistry({ workerId: 3, dir, clock }).acquire({
      node: node(),
      maxWorkerId: 1023,
    });
    await first.release(clock.now() + 40);
    const lease = await new LocalRegistry({ workerId: 3, dir, clock, toleranceMs: 50 }).acquire({
      node: node(),
      maxWorkerId: 1023,
    });
    expect(lease.lastTimestamp).toBe(clock.now() + 40);
    await lease.release();
  });

  it("holds the highest reported timestamp per worker id, for every node that uses the id", async () => {
    const dir = freshDir();
    const registry = new LocalRegistry({ workerId: [9, 10], dir });
    const lease = await registry.acquire({ node: node(), maxWorkerId: 1023, backups: 1 });
    const now = Date.now();
    await lease.report(now - 1000, [{ workerId: 10, lastTimestamp: now - 5000 }]);
    await lease.report(now - 2000);
    const cached = readLeaseCache(join(registry.serviceDir("orders"), "worker-9.json"));
    expect(cached).toMatchObject({ workerId: 9, timestamp: now - 1000, registry: "local" });
    expect(readLeaseCache(join(registry.serviceDir("orders"), "worker-10.json"))?.timestamp).toBe(
      now - 5000,
    );
    await lease.release();
    // Another node configured with id 9 later starts after that timestamp, not from 0.
    const other = await new LocalRegistry({ workerId: 9, dir }).acquire({
      node: node("10.9.9.9", 7000),
      maxWorkerId: 1023,
    });
    expect(other.lastTimestamp).toBe(now - 1000);
    await other.release();
  });

  it("refuses to start from a damaged cache file instead of guessing its timestamp", async () => {
    const dir = freshDir();
    const registry = new LocalRegistry({ workerId: 2, dir });
    const lease = await registry.acquire({ node: node(), maxWorkerId: 1023 });
    await lease.release(Date.now());
    writeFileSync(lease.cacheFile, '{"workerId": 2, "timest');
    const error = await rejection(registry.acquire({ node: node(), maxWorkerId: 1023 }));
    expect(error.code).toBe(ErrorCodes.CORRUPT_DATA);
    expect(error.message).toContain(lease.cacheFile);
    expect(existsSync(lease.lockFile)).toBe(false);
  });
});

describe("one holder per worker id", () => {
  it("refuses a second holder of the same id in the same process until the first releases", async () => {
    const dir = freshDir();
    const first = await new LocalRegistry({ workerId: 5, dir }).acquire({
      node: node(),
      maxWorkerId: 1023,
    });
    const error = await rejection(
      new LocalRegistry({ workerId: 5, dir }).acquire({ node: node(), maxWorkerId: 1023 }),
    );
    expect(error.code).toBe(ErrorCodes.WORKER_ID_IN_USE);
    expect(error.message).toContain(`pid ${process.pid}`);
    await first.release();
    const second = await new LocalRegistry({ workerId: 5, dir }).acquire({
      node: node(),
      maxWorkerId: 1023,
    });
    expect(second.workerId).toBe(5);
    await second.release();
  });

  it("takes over a lock whose pid was reused by another program, but not one of a live holder", async () => {
    const dir = freshDir();
    const registry = new LocalRegistry({ workerId: 8, dir });
    const lockFile = join(registry.serviceDir("orders"), "worker-8.lock");
    const lock = (processStart: string | undefined) =>
      JSON.stringify({
        pid: process.ppid,
        host: hostname(),
        // Same boot and PID namespace as this process: only then does a pid prove anything.
        bootId: readFileSync("/proc/sys/kernel/random/boot_id", "utf8").trim(),
        pidNamespace: readlinkSync("/proc/self/ns/pid"),
        processStart,
        token: "from-a-process-long-gone",
        node: "10.0.0.9:8080",
        acquiredAt: 0,
      });
    mkdirSync(registry.serviceDir("orders"), { recursive: true });
    // The parent process runs, but started at another time than the lock says: a reused pid.
    writeFileSync(lockFile, lock("1"));
    const lease = await registry.acquire({ node: node(), maxWorkerId: 1023 });
    expect(lease.workerId).toBe(8);
    await lease.release();
    // The same pid with its real start time is a live holder.
    const start = readFileSync(`/proc/${process.ppid}/stat`, "utf8");
    const realStart = start.slice(start.lastIndexOf(")") + 2).split(" ")[19];
    writeFileSync(lockFile, lock(realStart));
    const error = await rejection(registry.acquire({ node: node(), maxWorkerId: 1023 }));
    expect(error.code).toBe(ErrorCodes.WORKER_ID_IN_USE);
    expect(error.message).toContain(`pid ${process.ppid}`);
  });

  it("loses the lease when its lock file is taken over, and stops writing the cache", async () => {
    const dir = freshDir();
    const lease = await new LocalRegistry({ workerId: 6, dir }).acquire({
      node: node(),
      maxWorkerId: 1023,
    });
    await lease.report(Date.now());
    unlinkSync(lease.lockFile);
    const intruder = await new LocalRegistry({ workerId: 6, dir }).acquire({
      node: node("10.2.2.2", 1),
      maxWorkerId: 1023,
    });
    const before = readFileSync(lease.cacheFile, "utf8");
    const error = await rejection(lease.report(Date.now() + 10));
    expect(error.code).toBe(ErrorCodes.LEASE_LOST);
    expect(error.leafCode).toBe(-4);
    expect(lease.lost.aborted).toBe(true);
    expect(isLeafError(lease.lost.reason, ErrorCodes.LEASE_LOST)).toBe(true);
    expect(readFileSync(lease.cacheFile, "utf8")).toBe(before);
    // Releasing the lost lease leaves the new holder's lock alone.
    await lease.release();
    expect(existsSync(intruder.lockFile)).toBe(true);
    await intruder.release();
  });

  it("heartbeats its locks: fenceAt moves on, and lost aborts without a report once a lock is removed", async () => {
    const lease = await new LocalRegistry({
      workerId: [8, 108],
      dir: freshDir(),
      staleAfterMs: 400,
    }).acquire({ node: node(), maxWorkerId: 1023, backups: 1 });
    const first = lease.fenceAt!;
    expect(first).toBeLessThanOrEqual(performance.now() + 200);
    await until(() => lease.fenceAt! > first, "a heartbeat");
    expect(lease.lost.aborted).toBe(false);
    // The backup id's lock counts as much as the primary's.
    unlinkSync(lease.lockFile.replace("worker-8.lock", "worker-108.lock"));
    await until(() => lease.lost.aborted, "the lost lease");
    expect(lease.lost.reason).toMatchObject({ code: ErrorCodes.LEASE_LOST, leafCode: -4 });
    expect((lease.lost.reason as LeafError).message).toContain("worker id 108 lease lost");
    await lease.release();
    expect(existsSync(lease.lockFile)).toBe(false);
  });
});

/** Polls `check` every 20 ms until it holds. */
async function until(check: () => boolean, what: string): Promise<void> {
  const deadline = Date.now() + 30_000;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
