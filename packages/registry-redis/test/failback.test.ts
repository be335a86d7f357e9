// A failover away from a master and back, with the marker the master wrote itself: R1 is the master
// and R2 its replica. Node A takes the service's only worker id on R1 and issues ids. R2 is
// promoted, R1 becomes R2's replica (A now renews on R2), then R1's replication link is cut: R1
// misses A's renewals, and its copy of A's lease ends while A's renewals on R2 keep it alive. A's
// path is cut (it issues until it fences on its own clock), R1 is promoted back and node B asks for
// the id on R1. R1's run id is unchanged and the marker names it; only its replication id tells the
// failover. Every id A and B issue is kept and checked for duplicates.
//
// Clients reach "the master" through TCP proxies (fronts) that the test retargets, as a
// Sentinel-aware client or a virtual IP would move; A's front alone can be cut.
import { performance } from "node:perf_hooks";
import {
  type RedisHandle,
  redisCommand,
  redisInfoField,
  redisReplicaInSync,
  redisTimeMs,
  startRedis,
  TcpProxy,
  waitUntil,
} from "@leaf/testkit";
import type { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { RedisLease } from "../src/index";
import {
  type Closers,
  closeAll,
  expectNoDuplicates,
  expectSafeHandOver,
  FAILOVER_LEASE_MS,
  failoverRegistry,
  leaseEndOn,
  markerOf,
  olderThan,
  redisClient,
  startWhenGranted,
  takeAndIssue,
  takeOver,
  worker,
} from "./holders";

const TEST_MS = 120_000;

/**
 * R1 the master, R2 its replica through `p1`; `p2` leads to R2 (R1's link once it is R2's replica).
 */
let r1: RedisHandle;
let r2: RedisHandle;
let p1: TcpProxy;
let p2: TcpProxy;
/** A plain master with no replica yet, for the replication id changes that are no failover. */
let r3: RedisHandle;
const closers: Closers = [];
const client = (port: number) => redisClient(port, closers);
const registry = (c: Redis) => failoverRegistry(c, closers);

beforeAll(async () => {
  // All start at once: the tests wait until they have run for over a lease.
  [r1, r3] = await Promise.all([startRedis({ useEnv: false }), startRedis({ useEnv: false })]);
  p1 = await TcpProxy.start({ targetPort: r1.port });
  closers.push(() => p1.close());
  r2 = await startRedis({ useEnv: false, args: ["--replicaof", "127.0.0.1", String(p1.port)] });
  p2 = await TcpProxy.start({ targetPort: r2.port });
  closers.push(() => p2.close());
}, TEST_MS);

afterAll(async () => await closeAll(closers));

describe("registry-redis across a failover away from a master and back", () => {
  it(
    "a master promoted back after missing renewals, its own marker unchanged: detected as promoted, A fences before B gets the id",
    async () => {
      await olderThan(r1.port, FAILOVER_LEASE_MS);
      await olderThan(r2.port, FAILOVER_LEASE_MS);
      await waitUntil("R2 to be in sync with R1", () => redisReplicaInSync(r2.port, p1.port));
      const service = `failback-${process.pid}-${Date.now()}`;
      const r1RunId = await redisInfoField(r1.port, "server", "run_id");
      const fa = await TcpProxy.start({ targetPort: r1.port });
      const fb = await TcpProxy.start({ targetPort: r1.port });
      closers.push(
        () => fa.close(),
        () => fb.close(),
      );

      // A takes the only worker id on R1 and issues; its renewals and reports are confirmed.
      const a = await takeAndIssue(worker(registry(client(fa.port)), service, 1, closers));
      const leaseA = a.lease;
      const markerOnR1 = await markerOf(r1.port, service);
      expect(markerOnR1.run_id).toBe(r1RunId);
      expect(markerOnR1.replid).toBe(await redisInfoField(r1.port, "replication", "master_replid"));

      // Failover away: R2 is promoted with A's lease, R1 becomes R2's replica, A renews on R2.
      await waitUntil("R2 to have A's lease", async () => (await leaseEndOn(r2.port, service)) > 0);
      expect(await redisCommand(r2.port, "REPLICAOF", "NO", "ONE")).toBe("OK");
      const switchedAt = performance.now();
      fa.retarget(r2.port);
      fb.retarget(r2.port);
      expect(await redisCommand(r1.port, "REPLICAOF", "127.0.0.1", String(p2.port))).toBe("OK");
      await waitUntil("A to renew on R2", () => leaseA.lastRenewedAt > switchedAt);
      const endOnR2 = await leaseEndOn(r2.port, service);
      await waitUntil("R1 to be in sync with R2", () => redisReplicaInSync(r1.port, p2.port));
      await waitUntil(
        "R1 to have a renewal A made on R2",
        async () => (await leaseEndOn(r1.port, service)) >= endOnR2,
      );

      // R1's link is cut: it hears nothing more. A keeps renewing on R2 until R1's copy of its
      // lease has ended by R1's clock.
      p2.cutOff();
      const endOnR1 = await leaseEndOn(r1.port, service);
      await waitUntil(
        "A's lease to end in R1's copy",
        async () => (await redisTimeMs(r1.port)) > endOnR1 + 200,
        FAILOVER_LEASE_MS * 3,
      );
      const endedOnR1At = performance.now();
      await waitUntil("A to renew on R2 again", () => leaseA.lastRenewedAt > endedOnR1At);
      expect(leaseA.lost.aborted).toBe(false);
      expect(await leaseEndOn(r2.port, service)).toBeGreaterThan(await redisTimeMs(r2.port));
      // The same process and the marker it wrote: the run id tells nothing.
      const markerBefore = await markerOf(r1.port, service);
      expect(markerBefore.run_id).toBe(r1RunId);
      expect(markerBefore.replid).toBe(markerOnR1.replid);

      // Failover back: A's path is cut (it renews nowhere now), R1 is promoted, B asks on R1.
      fa.cutOff();
      expect(await redisCommand(r1.port, "REPLICAOF", "NO", "ONE")).toBe("OK");
      expect(await redisInfoField(r1.port, "server", "run_id")).toBe(r1RunId);
      const r1Replid = await redisInfoField(r1.port, "replication", "master_replid");
      expect(r1Replid).not.toBe(markerBefore.replid);
      fb.retarget(r1.port);
      expect(leaseA.lost.aborted).toBe(false); // A is still issuing: the dangerous window is open

      const b = await takeOver(a, worker(registry(client(fb.port)), service, 2, closers));
      const marker = await markerOf(r1.port, service);

      // A fenced on its own clock (it never reached R1 again), before B was granted its id; B's ids
      // start after all of A's; B's ask, the first on R1 promoted back, waited the quarantine.
      expectSafeHandOver(a, b, marker);
      expect(marker).toMatchObject({
        reason: "promoted",
        run_id: r1RunId,
        replid: r1Replid,
        floor: String(b.lease.floor),
      });
    },
    TEST_MS,
  );

  it(
    "a master's replication id changed by its first replica (no failover) holds back no grant",
    async () => {
      await olderThan(r3.port, FAILOVER_LEASE_MS);
      const service = `first-replica-${process.pid}-${Date.now()}`;
      const c = client(r3.port);
      const w = worker(registry(c), service, 3, closers);
      await startWhenGranted(w);
      const idsW = w.nextIds(100);
      await w.close();
      const before = await markerOf(r3.port, service);
      expect(before.replid).toBe(await redisInfoField(r3.port, "replication", "master_replid"));
      // The first call came a lease after R3 started: the floor (its start + one lease) is past and
      // held nothing back.
      expect(Number(before.floor)).toBeGreaterThan(0);
      expect(Number(before.floor)).toBeLessThan(await redisTimeMs(r3.port));

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

      const v = worker(registry(c), service, 4, closers);
      await startWhenGranted(v);
      const leaseV = v.lease as RedisLease;
      const idsV = v.nextIds(100);
      await v.close();
      expect(leaseV.floor).toBe(Number(before.floor));
      expectNoDuplicates([...idsW, ...idsV]);
      expect(await markerOf(r3.port, service)).toEqual({ ...before, replid });
    },
    TEST_MS,
  );
});
