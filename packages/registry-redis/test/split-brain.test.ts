// A split brain: a partition isolates the master R1, with node A on its side, from its replicas R2
// and R3, with node B on theirs; R2 is promoted (as Sentinel would on B's side) and R3 follows it,
// while R1 keeps running as a master. Nothing in R1 tells it another master exists, so the registry
// cannot see it: only Redis's `min-replicas-to-write` stops R1, which refuses writes once it has
// heard no replica for `min-replicas-max-lag` seconds. A's renewals then fail, and A fences on its
// own clock before B, on the promoted R2, is granted the id after the quarantine. The same scenario
// without the setting shows why it is required: R1 confirms A's renewals for as long as the
// partition lasts, and A and B issue under one worker id at once.
//
// All three Redis servers have the same settings (as a deployment would): R2 accepts writes once
// promoted because R3 replicates from it; with a single replica a promoted R2 would refuse every
// write itself. Clients reach R1 and R2 through TCP proxies (fronts); each replica replicates from
// R1 through a proxy of its own, cut for the partition (both ways, no FIN: R1 still lists them).
import { performance } from "node:perf_hooks";
import {
  countDuplicates,
  type RedisHandle,
  redisCommand,
  redisInfoField,
  redisReplicaInSync,
  startRedis,
  stopAll,
  TcpProxy,
  waitUntil,
} from "@leaf/testkit";
import type { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { RedisLease } from "../src/index";
import {
  type Closers,
  expectNoDuplicates,
  FAILOVER_LEASE_MS,
  failoverRegistry,
  issue,
  leaseEndOn,
  markerOf,
  olderThan,
  redisClient,
  startWhenGranted,
  timestamps,
  worker,
} from "./holders";

/** `min-replicas-max-lag`, seconds. R1 accepts writes for up to MAX_LAG + 2 s after the cut. */
const MAX_LAG = 2;
const TEST_MS = 120_000;

/** R1 the master; R2 and R3 its replicas through `p1` and `p3`. */
interface SplitSet {
  r1: RedisHandle;
  r2: RedisHandle;
  r3: RedisHandle;
  p1: TcpProxy;
  p3: TcpProxy;
  /** Started with `--min-replicas-to-write 1 --min-replicas-max-lag MAX_LAG`. */
  protectedSet: boolean;
}

const closers: Closers = [];
const client = (port: number) => redisClient(port, closers);
const registry = (c: Redis) => failoverRegistry(c, closers);
let guarded: SplitSet;
let unguarded: SplitSet;

beforeAll(async () => {
  // Both sets start at once: each test waits until its Redis servers have run for over a lease.
  [guarded, unguarded] = await Promise.all([startSet(true), startSet(false)]);
}, TEST_MS);

afterAll(async () => {
  for (const close of closers.reverse()) await close().catch(() => {});
  await stopAll();
});

async function startSet(protectedSet: boolean): Promise<SplitSet> {
  const args = protectedSet
    ? ["--min-replicas-to-write", "1", "--min-replicas-max-lag", String(MAX_LAG)]
    : [];
  const r1 = await startRedis({ useEnv: false, args });
  const [p1, p3] = await Promise.all([
    TcpProxy.start({ targetPort: r1.port }),
    TcpProxy.start({ targetPort: r1.port }),
  ]);
  closers.push(
    () => p1.close(),
    () => p3.close(),
  );
  const [r2, r3] = await Promise.all([
    startRedis({ useEnv: false, args: [...args, "--replicaof", "127.0.0.1", String(p1.port)] }),
    startRedis({ useEnv: false, args: [...args, "--replicaof", "127.0.0.1", String(p3.port)] }),
  ]);
  return { r1, r2, r3, p1, p3, protectedSet };
}

/** The lag (s since the last ACK) of each replica the master at `port` lists. */
async function replicaLags(port: number): Promise<number[]> {
  const text = String((await redisCommand(port, "INFO", "replication")) ?? "");
  return [...text.matchAll(/^slave\d+:.*,lag=(\d+)/gm)].map((m) => Number(m[1]));
}

/** How many commands the Redis at `port` refused with NOREPLICAS. */
async function noReplicasErrors(port: number): Promise<number> {
  const field = await redisInfoField(port, "errorstats", "errorstat_NOREPLICAS");
  return Number(/count=(\d+)/.exec(field)?.[1] ?? 0);
}

interface Outcome {
  idsA: bigint[];
  idsB: bigint[];
  leaseA: RedisLease;
  leaseB: RedisLease;
  aRefusals: string[];
  /** performance.now() of A's loss (0: never), R2's promotion, B's ask and B's grant. */
  aLostAt: number;
  promotedAt: number;
  bAskedAt: number;
  bGrantedAt: number;
  /** The send time of A's last confirmed renewal, at the end. */
  aRenewedAtEnd: number;
  marker: Record<string, string>;
}

/**
 * A takes the only worker id on R1 and issues; the partition cuts R1 off from R2 and R3 (A still
 * reaches R1); once R1 has heard no replica for over MAX_LAG seconds, R2 is promoted and R3
 * follows it; B asks for the id on R2 and issues. Both keep issuing until B has issued 1000 ids
 * and A has fenced (min-replicas-to-write) or renewed on R1 after B's grant (without).
 */
async function splitUnderA(set: SplitSet, service: string): Promise<Outcome> {
  await waitUntil(
    "R2 and R3 to be in sync with R1",
    async () =>
      (await redisReplicaInSync(set.r2.port, set.p1.port)) &&
      (await redisReplicaInSync(set.r3.port, set.p3.port)),
  );
  const fa = await TcpProxy.start({ targetPort: set.r1.port });
  const fb = await TcpProxy.start({ targetPort: set.r2.port });
  closers.push(
    () => fa.close(),
    () => fb.close(),
  );

  // A takes the only worker id on R1 and issues; its renewals and reports are confirmed.
  const a = worker(registry(client(fa.port)), service, 1, closers);
  await startWhenGranted(a);
  expect(a.lease!.workerId).toBe(0);
  const leaseA = a.lease as RedisLease;
  const grantedAt = leaseA.lastRenewedAt;
  const idsA: bigint[] = [];
  const issuingA = issue(a, idsA, 1);
  let aLostAt = 0;
  leaseA.lost.addEventListener("abort", () => {
    aLostAt = performance.now();
  });
  await waitUntil(
    "A to issue ids and renew its lease",
    () => idsA.length > 1000 && leaseA.lastRenewedAt > grantedAt + 1000,
  );
  await waitUntil(
    "R2 and R3 to have A's lease and the marker",
    async () =>
      (await leaseEndOn(set.r2.port, service)) > 0 && (await leaseEndOn(set.r3.port, service)) > 0,
  );

  // The partition: R1 hears nothing more from its replicas, nor they from it; A still reaches R1.
  set.p1.cutOff();
  set.p3.cutOff();
  await waitUntil(
    "R1 to have heard no replica for over min-replicas-max-lag",
    async () => {
      const lags = await replicaLags(set.r1.port);
      return lags.length === 2 && lags.every((lag) => lag > MAX_LAG);
    },
    FAILOVER_LEASE_MS,
  );
  if (set.protectedSet) {
    // R1 counts its good replicas once a second: it refuses writes from the next count on.
    await waitUntil(
      "R1 to refuse writes",
      async () =>
        (await redisInfoField(set.r1.port, "replication", "min_slaves_good_slaves")) === "0",
    );
  }

  // B's side: R2 is promoted while R1 runs on as a master, R3 follows R2.
  expect(await redisCommand(set.r2.port, "REPLICAOF", "NO", "ONE")).toBe("OK");
  const promotedAt = performance.now();
  expect(await redisCommand(set.r3.port, "REPLICAOF", "127.0.0.1", String(set.r2.port))).toBe("OK");
  await waitUntil("R3 to be in sync with R2", () => redisReplicaInSync(set.r3.port, set.r2.port));
  expect(await redisInfoField(set.r1.port, "replication", "role")).toBe("master");

  const idsB: bigint[] = [];
  const b = worker(registry(client(fb.port)), service, 2, closers);
  const bAskedAt = performance.now();
  const bGrantedAt = await startWhenGranted(b);
  const issuingB = issue(b, idsB, 1);
  await waitUntil("B to issue ids", () => idsB.length > 1000);
  if (set.protectedSet)
    await waitUntil("A to fence", () => leaseA.lost.aborted, FAILOVER_LEASE_MS * 2);
  else await waitUntil("A to renew on R1 after B's grant", () => leaseA.lastRenewedAt > bGrantedAt);
  await issuingB.stop();
  await issuingA.stop();
  const marker = await markerOf(set.r2.port, service);
  return {
    idsA,
    idsB,
    leaseA,
    leaseB: b.lease as RedisLease,
    aRefusals: issuingA.refusals,
    aLostAt,
    promotedAt,
    bAskedAt,
    bGrantedAt,
    aRenewedAtEnd: leaseA.lastRenewedAt,
    marker,
  };
}

describe("registry-redis across a split brain (the old master keeps running)", () => {
  it(
    "with min-replicas-to-write the isolated master refuses A's renewals: A fences before B gets the id on the promoted replica",
    async () => {
      const set = guarded;
      await Promise.all([set.r1, set.r2, set.r3].map((r) => olderThan(r.port, FAILOVER_LEASE_MS)));
      const service = `split-${process.pid}-${Date.now()}`;
      const refusedBefore = await noReplicasErrors(set.r1.port);
      const o = await splitUnderA(set, service);

      expectNoDuplicates([...o.idsA, ...o.idsB]);
      expect(o.leaseB.workerId).toBe(0);
      // R1 refused A's renewals once it had heard no replica for MAX_LAG s: A's last confirmed
      // renewal was sent before the promotion, and the refusal is the cause of A's fence.
      expect(await noReplicasErrors(set.r1.port)).toBeGreaterThan(refusedBefore);
      expect(await redisInfoField(set.r1.port, "replication", "min_slaves_good_slaves")).toBe("0");
      expect(o.aRenewedAtEnd).toBeLessThan(o.promotedAt);
      const reason = o.leaseA.lost.reason as Error;
      expect(reason.message).toMatch(/no renewal confirmed by Redis/);
      expect(String((reason.cause as Error | undefined)?.message)).toMatch(
        /refused the write \(NOREPLICAS/,
      );
      expect(o.aRefusals).toContain("LEASE_LOST");
      // A fenced on its own clock, before B was granted its id; B's ids start after all of A's.
      expect(o.aLostAt).toBeGreaterThan(0);
      expect(o.aLostAt).toBeLessThan(o.bGrantedAt);
      expect(timestamps(o.idsB).first).toBeGreaterThan(timestamps(o.idsA).last);
      // The quarantine: B's ask, the first on the promoted R2 (the marker names R1), waited a lease.
      expect(o.bGrantedAt - o.bAskedAt).toBeGreaterThan(FAILOVER_LEASE_MS - 1500);
      expect(o.leaseB.floor).toBeGreaterThan(0);
      expect(timestamps(o.idsB).first).toBeGreaterThanOrEqual(o.leaseB.floor);
      expect(o.marker).toMatchObject({ reason: "restarted", floor: String(o.leaseB.floor) });
    },
    TEST_MS,
  );

  it(
    "without min-replicas-to-write the isolated master confirms A's renewals and ids repeat: why the README requires it",
    async () => {
      const set = unguarded;
      await Promise.all([set.r1, set.r2, set.r3].map((r) => olderThan(r.port, FAILOVER_LEASE_MS)));
      const service = `split-unguarded-${process.pid}-${Date.now()}`;
      const o = await splitUnderA(set, service);

      // The quarantine held B back a lease, as above, but A never fenced: R1 confirmed its
      // renewals after B's grant, and both issued under worker id 0 at once.
      expect(o.bGrantedAt - o.bAskedAt).toBeGreaterThan(FAILOVER_LEASE_MS - 1500);
      expect(o.leaseB.workerId).toBe(0);
      expect(o.leaseA.lost.aborted).toBe(false);
      expect(o.aLostAt).toBe(0);
      expect(o.aRenewedAtEnd).toBeGreaterThan(o.bGrantedAt);
      expect(await noReplicasErrors(set.r1.port)).toBe(0);
      const count = countDuplicates([[...o.idsA, ...o.idsB]], 3);
      console.log(
        `split brain without min-replicas-to-write: ${count.duplicates} ids issued twice ` +
          `(A ${o.idsA.length} ids, B ${o.idsB.length} ids)`,
      );
      expect(count.duplicates).toBeGreaterThan(0);
    },
    TEST_MS,
  );
});
