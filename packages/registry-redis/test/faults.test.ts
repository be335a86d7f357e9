// Real faults against a real Redis: the server paused past the lease (SIGSTOP), one holder cut off
// by a TCP proxy while another node waits for its id, and Redis restarted without its data. Every
// id both nodes issue is kept and checked for duplicates.
import { performance } from "node:perf_hooks";
import { defineLayout, isLeafError, layouts, SnowflakeWorker } from "@leaf/core";
import { type RedisHandle, started, startRedis, stopAll, TcpProxy } from "@leaf/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { RedisRegistry, type RedisRegistryOptions } from "../src/index";

const LEASE_MS = 3000;
const timings: Partial<RedisRegistryOptions> = {
  leaseMs: LEASE_MS,
  safetyMarginMs: 600,
  renewIntervalMs: 500,
  commandTimeoutMs: 400,
};

/** One worker id (0) per service: whoever runs next must wait for that very id. */
const oneWorker = defineLayout({
  name: "one-worker",
  timestampBits: 41,
  workerBits: 0,
  sequenceBits: 12,
  unitMillis: 1,
  epoch: layouts.leaf.epoch,
});

let redis: RedisHandle;
const closers: (() => Promise<unknown>)[] = [];

beforeAll(async () => {
  redis = await startRedis({ useEnv: false });
});

afterAll(async () => {
  for (const close of closers.reverse()) await close().catch(() => {});
  await stopAll();
});

function registry(url: string): RedisRegistry {
  const r = new RedisRegistry({ url, ...timings });
  closers.push(() => r.close());
  return r;
}

async function worker(r: RedisRegistry, name: string, port: number): Promise<SnowflakeWorker> {
  const w = await started(
    new SnowflakeWorker({
      registry: r,
      node: { name, ip: "127.0.0.1", port },
      layout: oneWorker,
      reacquire: false,
      reportIntervalMs: 500,
      firstReportDelayMs: 200,
    }),
  );
  closers.push(() => w.close());
  return w;
}

/** Issues ids from `w` on every turn of the event loop until `stop()`; keeps every id. */
function issue(w: SnowflakeWorker, ids: bigint[]): { stop(): Promise<void>; refusals: string[] } {
  const refusals: string[] = [];
  let running = true;
  const loop = (async () => {
    while (running) {
      try {
        ids.push(...w.nextIds(20));
      } catch (error) {
        if (!isLeafError(error)) throw error;
        if (!refusals.includes(error.code)) refusals.push(error.code);
      }
      await new Promise((resolve) => setImmediate(resolve));
    }
  })();
  return {
    refusals,
    async stop() {
      running = false;
      await loop;
    },
  };
}

async function waitFor(what: string, check: () => boolean, ms = 30_000): Promise<void> {
  const until = performance.now() + ms;
  while (!check()) {
    if (performance.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** Acquire-based start that retries while every id is leased (WORKER_IDS_EXHAUSTED). */
async function workerWhenFree(
  r: RedisRegistry,
  name: string,
  port: number,
): Promise<SnowflakeWorker> {
  for (;;) {
    try {
      return await worker(r, name, port);
    } catch (error) {
      if (!(isLeafError(error) && error.code === "WORKER_IDS_EXHAUSTED")) throw error;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }
}

function expectNoDuplicates(ids: bigint[]): void {
  const seen = new Set<bigint>();
  const twice: bigint[] = [];
  for (const id of ids) {
    if (seen.has(id)) twice.push(id);
    seen.add(id);
  }
  expect({ duplicates: twice.length, first: twice.slice(0, 3) }).toEqual({
    duplicates: 0,
    first: [],
  });
}

describe("registry-redis under real faults", () => {
  it("fences a holder cut off from Redis before another node can take its id", async () => {
    const name = `cut-${process.pid}-${Date.now()}`;
    const proxy = await TcpProxy.start({ targetPort: redis.port });
    closers.push(() => proxy.close());
    // Node A reaches Redis through the proxy, node B directly; one worker id for the service.
    const a = await worker(registry(`redis://127.0.0.1:${proxy.port}`), name, 1);
    expect(a.lease!.workerId).toBe(0);
    const idsA: bigint[] = [];
    const idsB: bigint[] = [];
    const issuingA = issue(a, idsA);
    await waitFor("A to issue ids", () => idsA.length > 1000);
    const leaseA = a.lease!;
    let aLostAt = 0;
    leaseA.lost.addEventListener("abort", () => {
      aLostAt = performance.now();
    });

    proxy.cutOff();
    const b = await workerWhenFree(registry(redis.url), name, 2);
    const bGrantedAt = performance.now();
    const issuingB = issue(b, idsB);
    await waitFor("B to issue ids", () => idsB.length > 1000);
    await issuingB.stop();
    await issuingA.stop();

    expectNoDuplicates([...idsA, ...idsB]);
    expect(b.lease!.workerId).toBe(0);
    expect(leaseA.lost.aborted).toBe(true);
    expect((leaseA.lost.reason as Error).message).toMatch(/no renewal confirmed by Redis/);
    expect(aLostAt).toBeGreaterThan(0);
    expect(aLostAt).toBeLessThan(bGrantedAt);
    expect(issuingA.refusals).toContain("LEASE_LOST");
    proxy.heal();
  });

  it("fences the holder while Redis is paused past the lease, and hands the id on after", async () => {
    const name = `pause-${process.pid}-${Date.now()}`;
    const a = await worker(registry(redis.url), name, 1);
    const idsA: bigint[] = [];
    const issuingA = issue(a, idsA);
    await waitFor("A to issue ids", () => idsA.length > 1000);
    const leaseA = a.lease!;

    redis.pause();
    try {
      await waitFor("A to fence while Redis is paused", () => leaseA.lost.aborted, LEASE_MS * 5);
      // Past the lease by Redis's clock too, which keeps running while the process is stopped.
      await new Promise((resolve) => setTimeout(resolve, LEASE_MS));
    } finally {
      redis.resume();
    }
    await issuingA.stop();
    expect(issuingA.refusals).toContain("LEASE_LOST");

    const idsB: bigint[] = [];
    const b = await workerWhenFree(registry(redis.url), name, 2);
    expect(b.lease!.workerId).toBe(0);
    // B starts after A's horizon: the last renewal's clock + lease.
    expect(b.lease!.lastTimestamp).toBeGreaterThan(0);
    const issuingB = issue(b, idsB);
    await waitFor("B to issue ids", () => idsB.length > 1000);
    await issuingB.stop();
    expectNoDuplicates([...idsA, ...idsB]);
  });

  it("after a restart without persistence, the live holder fences and no node gets its id before it has", async () => {
    const name = `restart-${process.pid}-${Date.now()}`;
    const a = await workerWhenFree(registry(redis.url), name, 1);
    const idsA: bigint[] = [];
    const issuingA = issue(a, idsA);
    await waitFor("A to issue ids", () => idsA.length > 1000);
    const leaseA = a.lease!;
    let aLostAt = 0;
    leaseA.lost.addEventListener("abort", () => {
      aLostAt = performance.now();
    });

    await redis.restart(); // comes back empty: no RDB, no AOF
    const restartedAt = performance.now();
    const idsB: bigint[] = [];
    const b = await workerWhenFree(registry(redis.url), name, 2);
    const bGrantedAt = performance.now();
    const issuingB = issue(b, idsB);
    await waitFor("B to issue ids", () => idsB.length > 1000);
    await issuingB.stop();
    await issuingA.stop();

    expectNoDuplicates([...idsA, ...idsB]);
    expect(b.lease!.workerId).toBe(0);
    expect(leaseA.lost.aborted).toBe(true);
    expect((leaseA.lost.reason as Error).message).toMatch(
      /no longer carries this node's token|no renewal confirmed/,
    );
    expect(aLostAt).toBeGreaterThan(0);
    expect(aLostAt).toBeLessThan(bGrantedAt);
    // The grant was held back for one lease after the restart, and starts after the floor.
    expect(bGrantedAt - restartedAt).toBeGreaterThan(LEASE_MS - 1500);
    const lease = b.lease as unknown as { floor: number; lastTimestamp: number };
    expect(lease.floor).toBeGreaterThan(0);
    expect(lease.lastTimestamp).toBeGreaterThanOrEqual(lease.floor);
  });
});
