// What the fault tests of this package share: nodes holding the one worker id of a service,
// issuing ids under it until stopped, and the checks that no id was issued twice and that the next
// holder started after the last one.
import { performance } from "node:perf_hooks";
import { defineLayout, isLeafError, layouts, SnowflakeWorker } from "@leaf/core";
import {
  countDuplicates,
  redisCommand,
  redisHash,
  redisInfoField,
  stopAll,
  waitUntil,
} from "@leaf/testkit";
import { type Cluster, Redis } from "ioredis";
import { expect } from "vitest";
import {
  type RedisLease,
  RedisRegistry,
  type RedisRegistryOptions,
  registryKeys,
} from "../src/index";

/** One worker id (0) per service: whoever runs next must wait for that very id. */
export const oneWorker = defineLayout({
  name: "one-worker",
  timestampBits: 41,
  workerBits: 0,
  sequenceBits: 12,
  unitMillis: 1,
  epoch: layouts.leaf.epoch,
});

/** Things to close after the file's tests, last first. */
export type Closers = (() => Promise<unknown>)[];

/**
 * The lease of the failover tests (failover, failback, split brain): longer than a failover takes,
 * so the holder on the lost side would still be issuing when the other node asks.
 */
export const FAILOVER_LEASE_MS = 12_000;
const failoverTimings: Partial<RedisRegistryOptions> = {
  leaseMs: FAILOVER_LEASE_MS,
  safetyMarginMs: 2400,
  renewIntervalMs: 1000,
  commandTimeoutMs: 800,
};
const KEY_PREFIX = "leaf:registry:";

/** The keys of `service` under the registry's default prefix. */
export function keysOf(service: string) {
  return registryKeys(KEY_PREFIX, service);
}

/** A client of the Redis (or proxy) at `port` that keeps reconnecting; closed with the file. */
export function redisClient(port: number, closers: Closers): Redis {
  const c = new Redis({
    port,
    host: "127.0.0.1",
    maxRetriesPerRequest: 1,
    retryStrategy: () => 100,
  });
  c.on("error", () => {});
  closers.push(async () => c.disconnect());
  return c;
}

/** Runs the file's closers, last first, then stops every server the kit started. */
export async function closeAll(closers: Closers): Promise<void> {
  for (const close of closers.reverse()) await close().catch(() => {});
  await stopAll();
}

/** A registry on `client` with the failover tests' lease; closed with the file. */
export function failoverRegistry(client: Redis | Cluster, closers: Closers): RedisRegistry {
  const r = new RedisRegistry({ client, ...failoverTimings });
  closers.push(() => r.close());
  return r;
}

/** The marker hash of `service` on the Redis at `port`. */
export async function markerOf(port: number, service: string): Promise<Record<string, string>> {
  return await redisHash(port, keysOf(service).marker);
}

/** The lease end (Redis TIME, ms) of worker id 0 in the copy of the Redis at `port`; 0 if none. */
export async function leaseEndOn(port: number, service: string): Promise<number> {
  const raw = await redisCommand(port, "HGET", keysOf(service).leases, "0");
  return typeof raw === "string" ? Number((JSON.parse(raw) as { e: string }).e) : 0;
}

/** A snowflake worker on `r` (not started), closed with the file's closers. */
export function worker(
  r: RedisRegistry,
  name: string,
  port: number,
  closers: Closers,
): SnowflakeWorker {
  const w = new SnowflakeWorker({
    registry: r,
    node: { name, ip: "127.0.0.1", port },
    layout: oneWorker,
    reacquire: false,
    reportIntervalMs: 500,
    firstReportDelayMs: 200,
  });
  closers.push(() => w.close());
  return w;
}

/**
 * Starts `w`, retrying while every id is leased (WORKER_IDS_EXHAUSTED) or Redis is out of reach
 * (UNAVAILABLE); resolves with performance.now() of the grant. Throws, naming the last refusal,
 * when no grant came within `timeoutMs`.
 */
export async function startWhenGranted(w: SnowflakeWorker, timeoutMs = 120_000): Promise<number> {
  const until = performance.now() + timeoutMs;
  for (;;) {
    try {
      await w.start();
      return performance.now();
    } catch (error) {
      if (!(isLeafError(error) && ["WORKER_IDS_EXHAUSTED", "UNAVAILABLE"].includes(error.code))) {
        throw error;
      }
      if (performance.now() > until) {
        throw new Error(`no worker id granted within ${timeoutMs} ms: last refusal ${error.code}`, {
          cause: error,
        });
      }
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }
}

/**
 * Issues 20 ids from `w` at a time until `stop()`, keeping every id and the codes of the refusals;
 * between two batches it waits `pauseMs` (0: one turn of the event loop). Both nodes of a test
 * issue from sequence 0 up within the same milliseconds, so their ids collide if they ever share
 * the worker id at once.
 */
export function issue(
  w: SnowflakeWorker,
  ids: bigint[],
  pauseMs = 0,
): { stop(): Promise<void>; refusals: string[] } {
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
      await new Promise((resolve) =>
        pauseMs === 0 ? setImmediate(resolve) : setTimeout(resolve, pauseMs),
      );
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

/**
 * Until the Redis on `port` has run for longer than `leaseMs` (a young Redis quarantines by
 * itself).
 */
export async function olderThan(port: number, leaseMs: number): Promise<void> {
  await waitUntil(
    `Redis on ${port} to run for more than a lease`,
    async () =>
      Number(await redisInfoField(port, "server", "uptime_in_seconds")) * 1000 > leaseMs + 1000,
    leaseMs * 4,
  );
}

export function expectNoDuplicates(ids: bigint[]): void {
  const count = countDuplicates([ids], 3);
  expect({ duplicates: count.duplicates, first: count.examples }).toEqual({
    duplicates: 0,
    first: [],
  });
}

/** The earliest and latest timestamp (ms since the Unix epoch) among `ids`. */
export function timestamps(ids: bigint[]): { first: number; last: number } {
  let first = Number.POSITIVE_INFINITY;
  let last = 0;
  for (const id of ids) {
    const ms = oneWorker.decompose(id).timestampMs;
    if (ms < first) first = ms;
    if (ms > last) last = ms;
  }
  return { first, last };
}

/**
 * An earlier holder W of `service`: takes the id with `w`, issues over 1000 ids and releases it.
 * Resolves with W's ids once `read` (a command on the replica) shows the release, W's last write:
 * the stamp of id 0 and no lease (the grant and the marker came before it).
 */
export async function useAndRelease(
  w: SnowflakeWorker,
  service: string,
  read: (command: string, ...args: string[]) => Promise<unknown>,
): Promise<bigint[]> {
  await startWhenGranted(w);
  const ids: bigint[] = [];
  const issuing = issue(w, ids, 1);
  await waitUntil("W to issue ids", () => ids.length > 1000);
  await issuing.stop();
  await w.close();
  const keys = keysOf(service);
  await waitUntil(
    "the replica to have W's release",
    async () =>
      (await read("HEXISTS", keys.leases, "0")) === 0 &&
      (await read("HEXISTS", keys.stamps, "0")) === 1,
  );
  return ids;
}

/** What a failover test ends with: A, B, and the marker on the new master after B's grant. */
export interface HandOver {
  a: IssuingHolder;
  b: TakingHolder;
  marker: Record<string, string>;
}

/** Node A of a failover test: it holds the only worker id and issues ids until stopped. */
export interface IssuingHolder {
  lease: RedisLease;
  ids: bigint[];
  issuing: { stop(): Promise<void>; refusals: string[] };
  /** performance.now() when A's lease was lost; 0 while A holds it. */
  lostAt: number;
}

/**
 * A takes the only worker id (0) with `a` and issues ids, 20 every millisecond; resolves once it
 * has issued over 1000 ids and renewed its lease (renewals and reports confirmed by Redis).
 */
export async function takeAndIssue(a: SnowflakeWorker): Promise<IssuingHolder> {
  await startWhenGranted(a);
  expect(a.lease!.workerId).toBe(0);
  const lease = a.lease as RedisLease;
  const grantedAt = lease.lastRenewedAt;
  const ids: bigint[] = [];
  const holder: IssuingHolder = { lease, ids, issuing: issue(a, ids, 1), lostAt: 0 };
  lease.lost.addEventListener("abort", () => {
    holder.lostAt = performance.now();
  });
  await waitUntil(
    "A to issue ids and renew its lease",
    () => ids.length > 1000 && lease.lastRenewedAt > grantedAt + 1000,
  );
  return holder;
}

/** Node B of a failover test, after the hand-over. */
export interface TakingHolder {
  lease: RedisLease;
  ids: bigint[];
  /** performance.now() of B's first ask and of its grant. */
  askedAt: number;
  grantedAt: number;
}

/**
 * B asks for the worker id with `b` (retrying while it is leased or Redis is out of reach) and
 * issues ids; both issue until B has issued over 1000 ids and `aDone` has resolved (by default:
 * A has fenced), then both stop.
 */
export async function takeOver(
  a: IssuingHolder,
  b: SnowflakeWorker,
  aDone: (bGrantedAt: number) => Promise<void> = () =>
    waitUntil("A to fence", () => a.lease.lost.aborted, FAILOVER_LEASE_MS * 2),
): Promise<TakingHolder> {
  const ids: bigint[] = [];
  const askedAt = performance.now();
  const grantedAt = await startWhenGranted(b);
  const issuing = issue(b, ids, 1);
  await waitUntil("B to issue ids", () => ids.length > 1000);
  await aDone(grantedAt);
  await issuing.stop();
  await a.issuing.stop();
  return { lease: b.lease as RedisLease, ids, askedAt, grantedAt };
}

/**
 * What must hold after a failover that lost A's lease: no duplicate; A fenced on its own clock
 * (it never reached the new master) before B was granted the id; B's ids start after all of A's;
 * B's ask, the first on the new master, was held back for about a lease (the quarantine); B's
 * lease starts at or after the floor the marker keeps.
 */
export function expectSafeHandOver(
  a: IssuingHolder,
  b: TakingHolder,
  marker: Record<string, string>,
): void {
  expectNoDuplicates([...a.ids, ...b.ids]);
  expect(b.lease.workerId).toBe(0);
  expect((a.lease.lost.reason as Error).message).toMatch(/no renewal confirmed by Redis/);
  expect(a.issuing.refusals).toContain("LEASE_LOST");
  expect(a.lostAt).toBeGreaterThan(0);
  expect(a.lostAt).toBeLessThan(b.grantedAt);
  expect(timestamps(b.ids).first).toBeGreaterThan(timestamps(a.ids).last);
  expect(b.grantedAt - b.askedAt).toBeGreaterThan(FAILOVER_LEASE_MS - 1500);
  expect(b.lease.floor).toBeGreaterThan(0);
  expect(b.lease.lastTimestamp).toBeGreaterThanOrEqual(b.lease.floor);
  expect(Number(marker.floor)).toBe(b.lease.floor);
  expect(timestamps(b.ids).first).toBeGreaterThanOrEqual(b.lease.floor);
}
