// Real faults against a real Redis: the server paused past the lease (SIGSTOP), one holder cut off
// by a TCP proxy while another node waits for its id, and Redis restarted without its data. Every
// id both nodes issue is kept and checked for duplicates.
import { performance } from "node:perf_hooks";
import type { SnowflakeWorker } from "@leaf/core";
import { type RedisHandle, startRedis, stopAll, TcpProxy, waitUntil } from "@leaf/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { RedisRegistry, type RedisRegistryOptions } from "../src/index";
import { type Closers, expectNoDuplicates, issue, startWhenGranted, worker } from "./holders";

const LEASE_MS = 3000;
const timings: Partial<RedisRegistryOptions> = {
  leaseMs: LEASE_MS,
  safetyMarginMs: 600,
  renewIntervalMs: 500,
  commandTimeoutMs: 400,
};

let redis: RedisHandle;
const closers: Closers = [];

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

/** A worker on `r`, started once it is granted the service's one worker id. */
async function holder(r: RedisRegistry, name: string, port: number): Promise<SnowflakeWorker> {
  const w = worker(r, name, port, closers);
  await startWhenGranted(w);
  return w;
}

describe("registry-redis under real faults", () => {
  it("fences a holder cut off from Redis before another node can take its id", async () => {
    const name = `cut-${process.pid}-${Date.now()}`;
    const proxy = await TcpProxy.start({ targetPort: redis.port });
    closers.push(() => proxy.close());
    // Node A reaches Redis through the proxy, node B directly; one worker id for the service.
    const a = await holder(registry(`redis://127.0.0.1:${proxy.port}`), name, 1);
    expect(a.lease!.workerId).toBe(0);
    const idsA: bigint[] = [];
    const idsB: bigint[] = [];
    const issuingA = issue(a, idsA);
    await waitUntil("A to issue ids", () => idsA.length > 1000);
    const leaseA = a.lease!;
    let aLostAt = 0;
    leaseA.lost.addEventListener("abort", () => {
      aLostAt = performance.now();
    });

    proxy.cutOff();
    const b = await holder(registry(redis.url), name, 2);
    const bGrantedAt = performance.now();
    const issuingB = issue(b, idsB);
    await waitUntil("B to issue ids", () => idsB.length > 1000);
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
    const a = await holder(registry(redis.url), name, 1);
    const idsA: bigint[] = [];
    const issuingA = issue(a, idsA);
    await waitUntil("A to issue ids", () => idsA.length > 1000);
    const leaseA = a.lease!;

    redis.pause();
    try {
      await waitUntil("A to fence while Redis is paused", () => leaseA.lost.aborted, LEASE_MS * 5);
      // Past the lease by Redis's clock too, which keeps running while the process is stopped.
      await new Promise((resolve) => setTimeout(resolve, LEASE_MS));
    } finally {
      redis.resume();
    }
    await issuingA.stop();
    expect(issuingA.refusals).toContain("LEASE_LOST");

    const idsB: bigint[] = [];
    const b = await holder(registry(redis.url), name, 2);
    expect(b.lease!.workerId).toBe(0);
    // B starts after A's horizon: the last renewal's clock + lease.
    expect(b.lease!.lastTimestamp).toBeGreaterThan(0);
    const issuingB = issue(b, idsB);
    await waitUntil("B to issue ids", () => idsB.length > 1000);
    await issuingB.stop();
    expectNoDuplicates([...idsA, ...idsB]);
  });

  it("after a restart without persistence, the live holder fences and no node gets its id before it has", async () => {
    const name = `restart-${process.pid}-${Date.now()}`;
    const a = await holder(registry(redis.url), name, 1);
    const idsA: bigint[] = [];
    const issuingA = issue(a, idsA);
    await waitUntil("A to issue ids", () => idsA.length > 1000);
    const leaseA = a.lease!;
    let aLostAt = 0;
    leaseA.lost.addEventListener("abort", () => {
      aLostAt = performance.now();
    });

    await redis.restart(); // comes back empty: no RDB, no AOF
    const restartedAt = performance.now();
    const idsB: bigint[] = [];
    const b = await holder(registry(redis.url), name, 2);
    const bGrantedAt = performance.now();
    const issuingB = issue(b, idsB);
    await waitUntil("B to issue ids", () => idsB.length > 1000);
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

  it("after a restart without persistence, a first acquire a whole lease later still starts after the floor", async () => {
    const name = `late-${process.pid}-${Date.now()}`;
    const proxy = await TcpProxy.start({ targetPort: redis.port });
    closers.push(() => proxy.close());
    const a = await holder(registry(`redis://${proxy.address}`), name, 1);
    const idsA: bigint[] = [];
    const issuingA = issue(a, idsA);
    await waitUntil("A to issue ids", () => idsA.length > 1000);
    // A is cut off (its renewals never reach Redis, so nothing touches the name), then Redis comes
    // back empty, and nobody asks for the id for more than a lease.
    proxy.cutOff();
    await redis.restart();
    const restartedWall = Date.now();
    await new Promise((resolve) => setTimeout(resolve, LEASE_MS + 1500));
    const idsB: bigint[] = [];
    const b = await holder(registry(redis.url), name, 2);
    const issuingB = issue(b, idsB);
    await waitUntil("B to issue ids", () => idsB.length > 1000);
    await issuingB.stop();
    await issuingA.stop();
    expectNoDuplicates([...idsA, ...idsB]);
    // The floor is the restart + one lease, by Redis's clock (its uptime counts whole seconds, so
    // the restart may read up to 1 s early): every id the old holder could issue is before it, and
    // the new holder starts after it, whatever its own clock says.
    const lease = b.lease as unknown as { floor: number; lastTimestamp: number };
    expect(lease.floor).toBeGreaterThan(restartedWall + LEASE_MS - 1500);
    expect(lease.lastTimestamp).toBeGreaterThanOrEqual(lease.floor);
  });
});
