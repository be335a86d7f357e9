// A real Sentinel failover that loses the last writes: a master, a replica that replicates through
// a TCP proxy, and a real `redis-server --sentinel` (quorum 1). The replication link is cut (the
// replica hears nothing more, as across a partition), node A takes the service's only worker id on
// the master and issues ids, the master is killed (SIGKILL) and Sentinel promotes the replica,
// which never saw A's lease. Node A is cut off from the replica too (its Sentinel client reaches
// the replica through a cut proxy), so it keeps issuing until it fences on its own clock. Node B
// then asks for the id through Sentinel. Every id A and B issue is kept and checked for duplicates.
//
// Why a cut proxy and not SIGSTOP of the replica: on loopback the master's writes still land in the
// stopped replica's socket buffer, and it applies them after SIGCONT, master dead or not.
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  freePort,
  type RedisHandle,
  redisCommand,
  startRedis,
  TcpProxy,
  waitUntil,
} from "@leaf/testkit";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type Closers,
  closeAll,
  expectNoDuplicates,
  expectSafeHandOver,
  FAILOVER_LEASE_MS,
  failoverRegistry,
  type HandOver,
  keysOf,
  markerOf,
  olderThan,
  takeAndIssue,
  takeOver,
  useAndRelease,
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
const registry = (c: Redis) => failoverRegistry(c, closers);
const dir = mkdtempSync(join(tmpdir(), "leaf-failover-"));

beforeAll(async () => {
  // Both sets start at once: each test waits until its Redis servers have run for over a lease.
  sets.push(...(await Promise.all([startSet("leafa"), startSet("leafb")])));
}, TEST_MS);

afterAll(async () => {
  for (const sentinel of sentinels) sentinel.kill("SIGKILL");
  await closeAll(closers);
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

/**
 * The failover itself: cut the replication, A takes id 0 on the master and issues (with renewals
 * and reports confirmed), the master is SIGKILLed, Sentinel promotes the replica, B asks for the id
 * through Sentinel and issues. `service` names the registry's service.
 */
async function failOverUnderA(set: FailoverSet, service: string): Promise<HandOver> {
  // Still replicating through the proxy, and in sync.
  const before = await info(set.replica.port, "replication");
  expect(before).toContain(`master_port:${set.replication.port}`);
  expect(before).toContain("master_link_status:up");
  set.replication.cutOff();
  // A reaches the master directly and the replica only through a cut proxy: partitioned from it.
  const aToReplica = await TcpProxy.start({ targetPort: set.replica.port });
  closers.push(() => aToReplica.close());
  aToReplica.cutOff();
  const aClient = sentinelClient(set, {
    [`127.0.0.1:${set.replica.port}`]: { host: "127.0.0.1", port: aToReplica.port },
  });
  // Renewals and reports confirmed by the master, none of them seen by the replica.
  const a = await takeAndIssue(worker(registry(aClient), service, 1, closers));

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
  expect(a.lease.lost.aborted).toBe(false); // A is still issuing: the dangerous window is open

  const b = await takeOver(a, worker(registry(sentinelClient(set)), service, 2, closers));
  return { a, b, marker: await markerOf(set.replica.port, service) };
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
      expectSafeHandOver(o.a, o.b, o.marker);
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
      const idsW = await useAndRelease(w, service, (command, ...args) =>
        redisCommand(set.replica.port, command, ...args),
      );
      const markedBy = await redisCommand(
        set.replica.port,
        "HGET",
        keysOf(service).marker,
        "run_id",
      );
      const masterRunId = /run_id:(\w+)/.exec(await info(set.master.port, "server"))?.[1];

      const o = await failOverUnderA(set, service);
      expectSafeHandOver(o.a, o.b, o.marker);
      expectNoDuplicates([...idsW, ...o.a.ids, ...o.b.ids]);
      expect(masterRunId).toMatch(/^[0-9a-f]{40}$/);
      expect(markedBy).toBe(masterRunId);
      expect(o.marker.reason).toBe("restarted");
    },
    TEST_MS,
  );
});
