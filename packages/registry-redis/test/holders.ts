// What the fault tests of this package share: nodes holding the one worker id of a service,
// issuing ids under it until stopped, and the checks that no id was issued twice and that the next
// holder started after the last one.
import { performance } from "node:perf_hooks";
import { defineLayout, isLeafError, layouts, SnowflakeWorker } from "@leaf/core";
import { countDuplicates, redisCommand, redisHash, redisInfoField, waitUntil } from "@leaf/testkit";
import { Redis } from "ioredis";
import { expect } from "vitest";
import { RedisRegistry, type RedisRegistryOptions, registryKeys } from "../src/index";

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

/** A registry on `client` with the failover tests' lease; closed with the file. */
export function failoverRegistry(client: Redis, closers: Closers): RedisRegistry {
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
 * (UNAVAILABLE); resolves with performance.now() of the grant.
 */
export async function startWhenGranted(w: SnowflakeWorker): Promise<number> {
  for (;;) {
    try {
      await w.start();
      return performance.now();
    } catch (error) {
      if (!(isLeafError(error) && ["WORKER_IDS_EXHAUSTED", "UNAVAILABLE"].includes(error.code))) {
        throw error;
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

/** Until the Redis on `port` has run for longer than `leaseMs` (a young Redis quarantines by itself). */
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
