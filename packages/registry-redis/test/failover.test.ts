// A real Sentinel failover that loses the last writes: a master, a replica that replicates through a
// TCP proxy, and a real `redis-server --sentinel` (quorum 1). The replication link is cut (the
// replica hears nothing more, as across a partition), node A takes the service's only worker id on
// the master and issues ids, the master is killed (SIGKILL) and Sentinel promotes the replica, which
// never saw A's lease. Node A is cut off from the replica too (its Sentinel client reaches the
// replica through a cut proxy), so it keeps issuing until it fences on its own clock. Node B then
// asks for the id through Sentinel. Every id A and B issue is kept and checked for duplicates.
//
// Why a cut proxy and not SIGSTOP of the replica: on loopback the master's writes still land in the
// stopped replica's socket buffer, and it applies them after SIGCONT, master dead or not.
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import type { SnowflakeWorker } from "@leaf/core";
import {
  freePort,
  type RedisHandle,
  redisCommand,
  startRedis,
  stopAll,
  TcpProxy,
  waitUntil,
} from "@leaf/testkit";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { RedisLease } from "../src/index";
import {
  type Closers,
  expectNoDuplicates,
  FAILOVER_LEASE_MS,
  failoverRegistry,
  issue,
  keysOf,
  markerOf,
  olderThan,
  redisClient,
  startWhenGranted,
  timestamps,
  worker,
} from "./holders";

const TEST_MS = 120_000;

/** A master, a replica replicating through `replication`, and a Sentinel watching the master. */
interface FailoverSet {
  master: RedisHandle;
  replica: RedisHandle;
  /** Between the replica and the master: cutOff() and the replica hears nothing more. */
  replication: TcpProxy;
  /** Sentinel's name of the master. */
  name: string;
  sentinelPort: number;
}

const sets: FailoverSet[] = [];
const sentinels: ChildProcess[] = [];
const closers: Closers = [];
const _client = (port: number) => redisClient(port, closers);
const registry = (c: Redis) => failoverRegistry(c, closers);
const dir = mkdtempSync(join(tmpdir(), "leaf-failover-"));

beforeAll(async () => {
  // Both sets start at once: each test waits until its Redis servers have run for over a lease.
  sets.push(...(await Promise.all([startSet("leafa"), startSet("leafb")])));
}, TEST_MS);

afterAll(async () => {
  for (const close of closers.reverse()) await close().catch(() => {});
  for (const sentinel of sentinels) sentinel.kill("SIGKILL");
  await stopAll();
  rmSync(dir, { recursive: true, force: true });
});

async function startSet(name: string): Promise<FailoverSet> {
  const master = await startRedis({ useEnv: false });
  const replication = await TcpProxy.start({ targetPort: master.port });
  closers.push(() => replication.close());
  const replica = await startRedis({
    useEnv: false,
    args: ["--replicaof", "127.0.0.1", String(replication.port)],
  });
  await waitUntil(`the replica of ${name} to be in sync`, async () =>
    /master_link_status:up/.test(await info(replica.port, "replication")),
  );
  const sentinelPort = await freePort();
  const config = join(dir, `sentinel-${name}.conf`);
  writeFileSync(
    config,
    [
      `port ${sentinelPort}`,
      "bind 127.0.0.1",
      `dir ${dir}`,
      `sentinel monitor ${name} 127.0.0.1 ${master.port} 1`,
      `sentinel down-after-milliseconds ${name} 1000`,
      // Sentinel also "fixes" a replica whose master address is not the master's (this one
      // replicates through the proxy) once failover-timeout has passed: not within this file.
      `sentinel failover-timeout ${name} 600000`,
      "",
    ].join("\n"),
  );
  sentinels.push(spawn("redis-server", [config, "--sentinel"], { stdio: "ignore" }));
  // Ready once Sentinel names the master and knows the replica (it finds it in the master's INFO).
  await waitUntil(`Sentinel of ${name} to know the master and the replica`, async () => {
    const replicas = (await sentinelCall(sentinelPort, "replicas", name)) as string[][] | undefined;
    return (
      replicas?.some((fields) => {
        const flags = fields[fields.indexOf("flags") + 1] ?? "";
        return fields[fields.indexOf("port") + 1] === String(replica.port) && flags === "slave";
      }) === true
    );
  });
  return { master, replica, replication, name, sentinelPort };
}

async function sentinelCall(port: number, ...args: string[]): Promise<unknown> {
  return await redisCommand(port, "SENTINEL", ...args);
}

async function info(port: number, section: string): Promise<string> {
  return String((await redisCommand(port, "INFO", section)) ?? "");
}

/** A client that finds the master through Sentinel; `natMap` moves addresses (A's cut-off path). */
function sentinelClient(set: FailoverSet, natMap?: Record<string, { host: string; port: number }>) {
  const client = new Redis({
    sentinels: [{ host: "127.0.0.1", port: set.sentinelPort }],
    name: set.name,
    natMap,
    maxRetriesPerRequest: 1,
    retryStrategy: () => 100,
    sentinelRetryStrategy: () => 100,
  });
  client.on("error", () => {});
  closers.push(async () => client.disconnect());
  return client;
}

interface Outcome {
  idsA: bigint[];
  idsB: bigint[];
  /** performance.now() of A's loss, B's first ask and B's grant. */
  aLostAt: number;
  bAskedAt: number;
  bGrantedAt: number;
  aReason: string;
  aRefusals: string[];
  b: SnowflakeWorker;
  /** The marker hash on the promoted replica after B's grant. */
  marker: Record<string, string>;
}

/**
 * The failover itself: cut the replication, A takes id 0 on the master and issues (with renewals
 * and reports confirmed), the master is SIGKILLed, Sentinel promotes the replica, B asks for the id
 * through Sentinel and issues. `service` names the registry's service.
 */
async function failOverUnderA(set: FailoverSet, service: string): Promise<Outcome> {
  // Still replicating through the proxy, and in sync.
  const before = await info(set.replica.port, "replication");
  expect(before).toContain(`master_port:${set.replication.port}`);
  expect(before).toContain("master_link_status:up");
  set.replication.cutOff();
  // A reaches the master directly and the replica only through a cut proxy: partitioned from it.
  const aToReplica = await TcpProxy.start({ targetPort: set.replica.port });
  closers.push(() => aToReplica.close());
  aToReplica.cutOff();
  const a = worker(
    registry(
      sentinelClient(set, {
        [`127.0.0.1:${set.replica.port}`]: { host: "127.0.0.1", port: aToReplica.port },
      }),
    ),
    service,
    1,
    closers,
  );
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
  // Renewals and reports confirmed by the master, none of them seen by the replica.
  await waitUntil(
    "A to issue ids and renew its lease",
    () => idsA.length > 1000 && leaseA.lastRenewedAt > grantedAt + 1000,
  );

  await set.master.kill();
  await waitUntil("Sentinel to promote the replica", async () => {
    const master = (await sentinelCall(set.sentinelPort, "get-master-addr-by-name", set.name)) as
      | string[]
      | undefined;
    return (
      master?.[1] === String(set.replica.port) &&
      /role:master/.test(await info(set.replica.port, "replication"))
    );
  });
  expect(leaseA.lost.aborted).toBe(false); // A is still issuing: the dangerous window is open

  const idsB: bigint[] = [];
  const b = worker(registry(sentinelClient(set)), service, 2, closers);
  const bAskedAt = performance.now();
  const bGrantedAt = await startWhenGranted(b);
  const issuingB = issue(b, idsB, 1);
  await waitUntil("B to issue ids", () => idsB.length > 1000);
  await waitUntil("A to fence", () => leaseA.lost.aborted, FAILOVER_LEASE_MS * 2);
  await issuingB.stop();
  await issuingA.stop();
  const marker = await markerOf(set.replica.port, service);
  return {
    idsA,
    idsB,
    aLostAt,
    bAskedAt,
    bGrantedAt,
    aReason: (leaseA.lost.reason as Error).message,
    aRefusals: issuingA.refusals,
    b,
    marker,
  };
}

/** What must hold after every failover: A stopped first, B after all of A's ids, quarantine, floor. */
function expectSafeHandOver(o: Outcome): void {
  expectNoDuplicates([...o.idsA, ...o.idsB]);
  expect(o.b.lease!.workerId).toBe(0);
  // A fenced on its own clock (it never reached the new master), before B was granted its id.
  expect(o.aReason).toMatch(/no renewal confirmed by Redis/);
  expect(o.aRefusals).toContain("LEASE_LOST");
  expect(o.aLostAt).toBeGreaterThan(0);
  expect(o.aLostAt).toBeLessThan(o.bGrantedAt);
  // B's ids start after every id A issued.
  expect(timestamps(o.idsB).first).toBeGreaterThan(timestamps(o.idsA).last);
  // The quarantine: B's ask, the first on the promoted replica, was held back for about a lease.
  expect(o.bGrantedAt - o.bAskedAt).toBeGreaterThan(FAILOVER_LEASE_MS - 1500);
  // The floor: B's lease starts at or after the quarantine's end.
  const lease = o.b.lease as RedisLease;
  expect(lease.floor).toBeGreaterThan(0);
  expect(lease.lastTimestamp).toBeGreaterThanOrEqual(lease.floor);
  expect(Number(o.marker.floor)).toBe(lease.floor);
  expect(timestamps(o.idsB).first).toBeGreaterThanOrEqual(lease.floor);
}

describe("registry-redis across a real Sentinel failover that loses writes", () => {
  it(
    "a promoted replica that never saw the name: detected as promoted, A fences before B gets the id",
    async () => {
      const set = sets[0]!;
      await olderThan(set.master.port, FAILOVER_LEASE_MS);
      await olderThan(set.replica.port, FAILOVER_LEASE_MS);
      const service = `promoted-${process.pid}-${Date.now()}`;
      const o = await failOverUnderA(set, service);
      expectSafeHandOver(o);
      expect(o.marker.reason).toBe("promoted");
    },
    TEST_MS,
  );

  it(
    "a promoted replica with the old master's marker and stamps: detected by the run id, A fences before B gets the id",
    async () => {
      const set = sets[1]!;
      await olderThan(set.master.port, FAILOVER_LEASE_MS);
      await olderThan(set.replica.port, FAILOVER_LEASE_MS);
      const service = `marked-${process.pid}-${Date.now()}`;
      // An earlier holder W used id 0 and released it; the replica has the marker and W's stamp.
      const w = worker(registry(sentinelClient(set)), service, 3, closers);
      await startWhenGranted(w);
      const idsW: bigint[] = [];
      const issuingW = issue(w, idsW, 1);
      await waitUntil("W to issue ids", () => idsW.length > 1000);
      await issuingW.stop();
      await w.close();
      const keys = keysOf(service);
      // The release (the stamp and no lease) is W's last write, after its grant and the marker.
      await waitUntil(
        "the replica to have W's release",
        async () =>
          (await redisCommand(set.replica.port, "HEXISTS", keys.leases, "0")) === 0 &&
          (await redisCommand(set.replica.port, "HEXISTS", keys.stamps, "0")) === 1,
      );
      const markedBy = await redisCommand(set.replica.port, "HGET", keys.marker, "run_id");
      const masterRunId = /run_id:(\w+)/.exec(await info(set.master.port, "server"))?.[1];

      const o = await failOverUnderA(set, service);
      expectSafeHandOver(o);
      expectNoDuplicates([...idsW, ...o.idsA, ...o.idsB]);
      expect(masterRunId).toMatch(/^[0-9a-f]{40}$/);
      expect(markedBy).toBe(masterRunId);
      expect(o.marker.reason).toBe("restarted");
    },
    TEST_MS,
  );
});
