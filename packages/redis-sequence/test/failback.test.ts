// A failover away from a master and back, with the marker the master wrote itself. R1 is the master
// and R2 its replica (through proxy P1). Clients A and B of one namespace take ids of one shard on
// R1. R2 is promoted, R1 becomes R2's replica (through P2) and is cut off once in sync: it misses
// everything that follows. A takes ids on R2 (fenced there first: R2 is another process), then R1
// is promoted back and B asks R1 for the same second A just used on R2. R1's run id is unchanged
// and its marker names it; only its replication id tells that it was a replica meanwhile and missed
// the counters A drew on R2. Every id A and B get is kept and checked for duplicates.
// Also: a replication id change that is no failover (a first replica) fences nothing, and a counter
// deleted or the database flushed on the running Redis (same run id and replication id) is still
// refused.
//
// The clients reach "the master" through proxies (fronts) that the test retargets, as a
// Sentinel-aware client or a virtual IP would move. A and B share a ManualClock so that B asks for
// exactly the second A used on R2 however slow the machine: that second stays within
// maxClockSkewMs of Redis TIME for the whole failover back (Redis checks it on every allocation).
// The sequence does not look at Redis's uptime, so no server has to age first.
import { ErrorCodes, isLeafError, type LeafError, ManualClock } from "@leaf/core";
import {
  type RedisHandle,
  redisCommand,
  redisHash,
  redisInfoField,
  redisReplicaInSync,
  startRedis,
  stopAll,
  TcpProxy,
  waitUntil,
} from "@leaf/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { RedisSequence, type RedisSequenceOptions } from "../src/index";
import { duplicates, freshNamespace, passFenceManually, sleep, warningSink } from "./helpers";

const TEST_MS = 120_000;
/** Wide, so that the pinned second stays acceptable to Redis through a slow failover back. */
const SKEW_MS = 5000;
const MARGIN_MS = 1000;
/**
 * The shard every id is taken for: with the namespace's one counter per second, ids then collide.
 */
const SHARD = 7;
/** A fixed range size, so that A's and B's ranges of a second start at the same sequences. */
const BATCH = 4096;

/**
 * R1 the master, R2 its replica through `p1`; `p2` leads to R2 (R1's link once it is R2's replica).
 */
let r1: RedisHandle;
let r2: RedisHandle;
let p1: TcpProxy;
let p2: TcpProxy;
/** A plain master with no replica yet, for the replication id changes that are no failover. */
let r3: RedisHandle;
const closers: (() => Promise<unknown>)[] = [];

beforeAll(async () => {
  [r1, r3] = await Promise.all([startRedis({ useEnv: false }), startRedis({ useEnv: false })]);
  p1 = await TcpProxy.start({ targetPort: r1.port });
  closers.push(() => p1.close());
  r2 = await startRedis({ useEnv: false, args: ["--replicaof", "127.0.0.1", String(p1.port)] });
  p2 = await TcpProxy.start({ targetPort: r2.port });
  closers.push(() => p2.close());
}, TEST_MS);

afterAll(async () => {
  for (const close of closers.reverse()) await close().catch(() => {});
  await stopAll();
});

/**
 * A started sequence of `namespace` through the Redis (or front) at `port`, closed after the file.
 */
async function sequenceAt(
  port: number,
  namespace: string,
  options: Partial<RedisSequenceOptions> = {},
): Promise<RedisSequence> {
  const sequence = new RedisSequence({
    url: `redis://127.0.0.1:${port}`,
    namespace,
    maxClockSkewMs: SKEW_MS,
    fenceMarginMs: MARGIN_MS,
    batchSize: BATCH,
    minBatchSize: BATCH,
    refillTimeoutMs: 3000,
    connectTimeoutMs: 10_000,
    maxWaitMs: 2000,
    onWarning: warningSink().onWarning,
    ...options,
  });
  closers.push(() => sequence.close());
  await sequence.start();
  return sequence;
}

/** True for the refusal of a fenced second (UNAVAILABLE naming the fence), not a missing Redis. */
function isFenced(error: unknown): error is LeafError {
  return isLeafError(error, ErrorCodes.UNAVAILABLE) && error.details?.fenceSecond !== undefined;
}

/**
 * Takes `count` ids of SHARD from `sequence` into `ids`, in calls of at most 512. While Redis is
 * out of reach (a front was just retargeted and the client reconnects) it tries again; it stops at
 * the first other failure (a fenced second) and returns it.
 */
async function take(
  sequence: RedisSequence,
  count: number,
  ids: bigint[],
): Promise<LeafError | undefined> {
  const until = performance.now() + 60_000;
  let taken = 0;
  while (taken < count) {
    try {
      const got = await sequence.nextIds(SHARD, Math.min(512, count - taken));
      ids.push(...got);
      taken += got.length;
    } catch (error) {
      if (!isLeafError(error)) throw error;
      if (error.code !== ErrorCodes.UNAVAILABLE || isFenced(error)) return error;
      if (performance.now() > until) throw error;
      await sleep(100);
    }
  }
  return undefined;
}

function secondsOf(sequence: RedisSequence, ids: bigint[]): number[] {
  return [...new Set(ids.map((id) => sequence.parse(id).second))].sort();
}

describe("redis-sequence across a failover away from a master and back", () => {
  it(
    "a master promoted back after missing the other master's counters, its own marker unchanged: detected as promoted, the seconds used meanwhile are refused, no id repeats",
    async () => {
      await waitUntil("R2 to be in sync with R1", () => redisReplicaInSync(r2.port, p1.port));
      const namespace = freshNamespace("failback");
      const r1RunId = await redisInfoField(r1.port, "server", "run_id");
      const fa = await TcpProxy.start({ targetPort: r1.port });
      const fb = await TcpProxy.start({ targetPort: r1.port });
      closers.push(
        () => fa.close(),
        () => fb.close(),
      );
      const clock = new ManualClock(Date.now());
      const a = await sequenceAt(fa.port, namespace, { clock });
      const b = await sequenceAt(fb.port, namespace, { clock });
      const marker = a.keys.marker();
      const counterKey = (second: number) => a.keys.sequence(second);

      // Both take ids of one second on R1 (after the new namespace's fence).
      const s = await passFenceManually(a, clock, SKEW_MS);
      const idsA: bigint[] = [];
      const idsB: bigint[] = [];
      expect(await take(a, 3000, idsA)).toBeUndefined();
      expect(await take(b, 3000, idsB)).toBeUndefined();
      expect(secondsOf(a, [...idsA, ...idsB])).toEqual([s]);
      const markerOnR1 = await redisHash(r1.port, marker);
      expect(markerOnR1).toMatchObject({
        run_id: r1RunId,
        replid: await redisInfoField(r1.port, "replication", "master_replid"),
        reason: "missing",
      });
      const counterOnR1 = await redisCommand(r1.port, "GET", counterKey(s));
      await waitUntil("R2 to have R1's counter and marker", async () => {
        const same = (await redisCommand(r2.port, "GET", counterKey(s))) === counterOnR1;
        return same && (await redisHash(r2.port, marker)).fence === markerOnR1.fence;
      });

      // Failover away: R2 is promoted, R1 becomes its replica, the fronts lead to R2. Once R1 is in
      // sync its link is cut: it hears nothing more.
      expect(await redisCommand(r2.port, "REPLICAOF", "NO", "ONE")).toBe("OK");
      fa.retarget(r2.port);
      fb.retarget(r2.port);
      expect(await redisCommand(r1.port, "REPLICAOF", "127.0.0.1", String(p2.port))).toBe("OK");
      await waitUntil("R1 to be in sync with R2", () => redisReplicaInSync(r1.port, p2.port));
      p2.cutOff();
      expect(await redisHash(r1.port, marker)).toEqual(markerOnR1);

      // A takes ids on R2: another process, so the marker fences R2 first (reason restarted); A
      // then takes ids of the first second after that fence, T.
      clock.set(Math.max(clock.now(), Date.now()));
      const fencedOnR2 = await take(a, 100_000, idsA);
      expect(isFenced(fencedOnR2)).toBe(true);
      expect(await redisHash(r2.port, marker)).toMatchObject({ reason: "restarted" });
      const t = await passFenceManually(a, clock, SKEW_MS);
      const idsAOnR2: bigint[] = [];
      expect(await take(a, 10_000, idsAOnR2)).toBeUndefined();
      idsA.push(...idsAOnR2);
      expect(secondsOf(a, idsAOnR2)).toEqual([t]);
      expect(Number(await redisCommand(r2.port, "GET", counterKey(t)))).toBeGreaterThanOrEqual(
        10_000,
      );

      // Failover back, within second T of the clients: R1 is promoted (R2 becomes its replica) and
      // the fronts lead to R1. R1 never heard of second T, and its marker is the one it wrote.
      expect(await redisCommand(r1.port, "REPLICAOF", "NO", "ONE")).toBe("OK");
      expect(await redisInfoField(r1.port, "server", "run_id")).toBe(r1RunId);
      const r1Replid = await redisInfoField(r1.port, "replication", "master_replid");
      expect(r1Replid).not.toBe(markerOnR1.replid);
      expect(await redisInfoField(r1.port, "replication", "second_repl_offset")).not.toBe("-1");
      expect(await redisCommand(r1.port, "EXISTS", counterKey(t))).toBe(0);
      expect(await redisHash(r1.port, marker)).toEqual(markerOnR1);
      fb.retarget(r1.port);
      fa.retarget(r1.port);
      expect(await redisCommand(r2.port, "REPLICAOF", "127.0.0.1", String(p1.port))).toBe("OK");

      // B asks R1 for second T; A, with sequences of T left from R2, asks for more.
      const refusedB = await take(b, 10_000, idsB);
      const refusedA = await take(a, 20_000, idsA);
      const markerAfter = await redisHash(r1.port, marker);

      // Then both wait for the fence and take ids of the next second on R1.
      let u = t;
      if (isFenced(refusedB)) {
        u = await passFenceManually(b, clock, SKEW_MS);
        const afterA: bigint[] = [];
        const afterB: bigint[] = [];
        expect(await take(a, 3000, afterA)).toBeUndefined();
        expect(await take(b, 3000, afterB)).toBeUndefined();
        expect(secondsOf(a, [...afterA, ...afterB])).toEqual([u]);
        idsA.push(...afterA);
        idsB.push(...afterB);
      }

      const all = [...idsA, ...idsB];
      expect({
        ids: all.length > 20_000,
        duplicates: duplicates(all).length,
        reason: markerAfter.reason,
        refusedB: isFenced(refusedB),
        refusedA: isFenced(refusedA),
      }).toEqual({ ids: true, duplicates: 0, reason: "promoted", refusedB: true, refusedA: true });
      // The fence covers second T: refused as long as a wait for it is longer than maxWaitMs.
      const fence = Number(markerAfter.fence);
      expect(refusedB!.details?.fenceSecond).toBe(fence);
      expect(fence).toBeGreaterThanOrEqual(t);
      expect(markerAfter).toMatchObject({ run_id: r1RunId, replid: r1Replid });
      expect(b.state().stats.refused.fenced).toBeGreaterThan(0);
      // B's only ids after the failover back are of a second past the fence.
      expect(secondsOf(b, idsB)).toEqual([s, u]);
      expect(u).toBe(fence + 1);
    },
    TEST_MS,
  );

  it(
    "a master's replication id changed by its first replica (no failover) fences nothing",
    async () => {
      const namespace = freshNamespace("first-replica");
      const quick = { maxClockSkewMs: 1000, maxWaitMs: 10_000 };
      const c = await sequenceAt(r3.port, namespace, quick);
      const ids = await c.nextIds(SHARD, 100); // waits out the new namespace's fence
      const before = await redisHash(r3.port, c.keys.marker());
      expect(before.replid).toBe(await redisInfoField(r3.port, "replication", "master_replid"));

      // Its first replica: R3 creates its replication backlog under a new replication id and
      // clears the second one (Redis does so whenever a master creates or frees its backlog).
      const r4 = await startRedis({
        useEnv: false,
        args: ["--replicaof", "127.0.0.1", String(r3.port)],
      });
      await waitUntil("R4 to be in sync with R3", () => redisReplicaInSync(r4.port, r3.port));
      const replid = await redisInfoField(r3.port, "replication", "master_replid");
      expect(replid).not.toBe(before.replid);
      expect(await redisInfoField(r3.port, "replication", "second_repl_offset")).toBe("-1");

      // A new client's first round trip checks the marker: no fence, no wait.
      const d = await sequenceAt(r3.port, namespace, quick);
      ids.push(...(await d.nextIds(SHARD, 100)));
      expect(d.state().stats.waits).toBe(0);
      expect(d.state().stats.refused.fenced).toBe(0);
      expect(duplicates(ids)).toEqual([]);
      const after = await redisHash(r3.port, c.keys.marker());
      expect(after).toEqual({ ...before, replid, high_second: after.high_second });
    },
    TEST_MS,
  );

  it(
    "a counter deleted or the database flushed on the running Redis (same run id and replication id): the second is refused, no id repeats",
    async () => {
      const namespace = freshNamespace("flushed");
      const clock = new ManualClock(Date.now());
      const f = await sequenceAt(r3.port, namespace, { clock });
      const x = await passFenceManually(f, clock, SKEW_MS);
      const ids: bigint[] = [];
      expect(await take(f, 3000, ids)).toBeUndefined();
      expect(secondsOf(f, ids)).toEqual([x]);

      // The counter alone: the marker's high-water second is x, so its missing counter is refused.
      expect(await redisCommand(r3.port, "DEL", f.keys.sequence(x))).toBe(1);
      const g = await sequenceAt(r3.port, namespace, { clock });
      const behind = await take(g, 1000, ids);
      expect(isLeafError(behind, ErrorCodes.CLOCK_BEHIND)).toBe(true);
      expect(g.state().stats.refused.behind).toBeGreaterThan(0);

      // Everything, marker included: the marker is missing, so the seconds up to the fence are.
      expect(await redisCommand(r3.port, "FLUSHALL")).toBe("OK");
      const h = await sequenceAt(r3.port, namespace, { clock });
      const fenced = await take(h, 1000, ids);
      expect(isFenced(fenced)).toBe(true);
      expect(fenced!.details?.fenceSecond).toBeGreaterThanOrEqual(x);
      expect(await redisHash(r3.port, f.keys.marker())).toMatchObject({ reason: "missing" });

      const y = await passFenceManually(h, clock, SKEW_MS);
      const after: bigint[] = [];
      expect(await take(h, 3000, after)).toBeUndefined();
      expect(await take(f, 3000, after)).toBeUndefined();
      expect(secondsOf(f, after)).toEqual([y]);
      expect(duplicates([...ids, ...after])).toEqual([]);
    },
    TEST_MS,
  );
});
