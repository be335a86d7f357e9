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
  type RedisReplicaSet,
  redisErrorCount,
  redisInfoField,
  startRedisReplicaSet,
  TcpProxy,
  waitUntil,
} from "@leaf/testkit";
import type { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type Closers,
  closeAll,
  expectSafeHandOver,
  FAILOVER_LEASE_MS,
  failoverRegistry,
  type IssuingHolder,
  leaseEndOn,
  markerOf,
  olderThan,
  redisClient,
  type TakingHolder,
  takeAndIssue,
  takeOver,
  worker,
} from "./holders";

/** `min-replicas-max-lag`, seconds. R1 accepts writes for up to MAX_LAG + 2 s after the cut. */
const MAX_LAG = 2;
const TEST_MS = 120_000;

/** R1 the master; R2 and R3 its replicas, each through a link of its own. */
interface SplitSet {
  servers: RedisReplicaSet;
  r1: RedisHandle;
  r2: RedisHandle;
  r3: RedisHandle;
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

afterAll(async () => await closeAll(closers));

async function startSet(protectedSet: boolean): Promise<SplitSet> {
  const args = protectedSet
    ? ["--min-replicas-to-write", "1", "--min-replicas-max-lag", String(MAX_LAG)]
    : [];
  const servers = await startRedisReplicaSet({ replicas: 2, args });
  closers.push(() => servers.dispose());
  const [r2, r3] = servers.replicas as [RedisHandle, RedisHandle];
  return { servers, r1: servers.master, r2, r3, protectedSet };
}

interface Outcome {
  a: IssuingHolder;
  b: TakingHolder;
  /** performance.now() of R2's promotion. */
  promotedAt: number;
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
  await set.servers.waitInSync();
  const fa = await TcpProxy.start({ targetPort: set.r1.port });
  const fb = await TcpProxy.start({ targetPort: set.r2.port });
  closers.push(
    () => fa.close(),
    () => fb.close(),
  );

  // A takes the only worker id on R1 and issues; its renewals and reports are confirmed.
  const a = await takeAndIssue(worker(registry(client(fa.port)), service, 1, closers));
  await waitUntil(
    "R2 and R3 to have A's lease and the marker",
    async () =>
      (await leaseEndOn(set.r2.port, service)) > 0 && (await leaseEndOn(set.r3.port, service)) > 0,
  );

  // The partition: R1 hears nothing more from its replicas, nor they from it; A still reaches R1.
  await set.servers.isolateMaster(MAX_LAG, FAILOVER_LEASE_MS);
  if (set.protectedSet) {
    // R1 counts its good replicas once a second: it refuses writes from the next count on.
    await waitUntil(
      "R1 to refuse writes",
      async () =>
        (await redisInfoField(set.r1.port, "replication", "min_slaves_good_slaves")) === "0",
    );
  }

  // B's side: R2 is promoted while R1 runs on as a master, R3 follows R2.
  // (Taken just before: promote() resolves once R3 is in sync with R2.)
  const promotedAt = performance.now();
  await set.servers.promote(0);
  expect(await redisInfoField(set.r1.port, "replication", "role")).toBe("master");

  const b = await takeOver(
    a,
    worker(registry(client(fb.port)), service, 2, closers),
    set.protectedSet
      ? undefined
      : (bGrantedAt) =>
          waitUntil("A to renew on R1 after B's grant", () => a.lease.lastRenewedAt > bGrantedAt),
  );
  return {
    a,
    b,
    promotedAt,
    aRenewedAtEnd: a.lease.lastRenewedAt,
    marker: await markerOf(set.r2.port, service),
  };
}

describe("registry-redis across a split brain (the old master keeps running)", () => {
  it(
    "with min-replicas-to-write the isolated master refuses A's renewals: A fences before B gets the id on the promoted replica",
    async () => {
      const set = guarded;
      await Promise.all([set.r1, set.r2, set.r3].map((r) => olderThan(r.port, FAILOVER_LEASE_MS)));
      const service = `split-${process.pid}-${Date.now()}`;
      const refusedBefore = await redisErrorCount(set.r1.port, "NOREPLICAS");
      const o = await splitUnderA(set, service);

      // R1 refused A's renewals once it had heard no replica for MAX_LAG s: A's last confirmed
      // renewal was sent before the promotion, and the refusal is the cause of A's fence.
      expect(await redisErrorCount(set.r1.port, "NOREPLICAS")).toBeGreaterThan(refusedBefore);
      expect(await redisInfoField(set.r1.port, "replication", "min_slaves_good_slaves")).toBe("0");
      expect(o.aRenewedAtEnd).toBeLessThan(o.promotedAt);
      const reason = o.a.lease.lost.reason as Error;
      expect(String((reason.cause as Error | undefined)?.message)).toMatch(
        /refused the write \(NOREPLICAS/,
      );
      // A fenced on its own clock, before B was granted its id; B's ids start after all of A's;
      // the quarantine: B's ask, the first on the promoted R2 (the marker names R1), waited a
      // lease.
      expectSafeHandOver(o.a, o.b, o.marker);
      expect(o.marker).toMatchObject({ reason: "restarted", floor: String(o.b.lease.floor) });
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
      expect(o.b.grantedAt - o.b.askedAt).toBeGreaterThan(FAILOVER_LEASE_MS - 1500);
      expect(o.b.lease.workerId).toBe(0);
      expect(o.a.lease.lost.aborted).toBe(false);
      expect(o.a.lostAt).toBe(0);
      expect(o.aRenewedAtEnd).toBeGreaterThan(o.b.grantedAt);
      expect(await redisErrorCount(set.r1.port, "NOREPLICAS")).toBe(0);
      const count = countDuplicates([[...o.a.ids, ...o.b.ids]], 3);
      console.log(
        `split brain without min-replicas-to-write: ${count.duplicates} ids issued twice ` +
          `(A ${o.a.ids.length} ids, B ${o.b.ids.length} ids)`,
      );
      expect(count.duplicates).toBeGreaterThan(0);
    },
    TEST_MS,
  );
});
