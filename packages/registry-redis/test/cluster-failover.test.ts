// A real Redis Cluster failover that loses the last writes: three masters, each with one replica,
// started through the test kit. The master M that owns the service's slot announces a TCP proxy as
// its address (`cluster-announce-port`), so its replica R replicates through it; the proxy is cut
// (R hears nothing more, as when the master dies before its asynchronous replication stream left
// it). Node A takes the service's only worker id on M and issues ids, M is killed (SIGKILL), and
// the cluster itself promotes R after `cluster-node-timeout` (no Sentinel, no manual command): R
// never saw A's lease. Node A reaches M directly and R only through a cut proxy (its ioredis
// Cluster client maps the addresses), so it keeps issuing until it fences on its own clock. Node B
// then asks for the id through a plain Cluster client. Every id A and B issue is kept and checked
// for duplicates.
//
// `cluster-replica-validity-factor 0`: R's link to M is cut for a while before M dies, and a
// replica whose data is older than node-timeout x factor would not stand for election.
import { performance } from "node:perf_hooks";
import {
  type RedisClusterPair,
  type RedisHandle,
  redisClusterNodes,
  redisClusterPairThroughProxy,
  redisCommand,
  redisInfoField,
  redisKeyInSlots,
  redisReplicaCommand,
  redisReplicaInSync,
  startRedisCluster,
  TcpProxy,
  waitUntil,
} from "@leaf/testkit";
import { Cluster } from "ioredis";
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

const TEST_MS = 180_000;
const NODE_TIMEOUT_MS = 3000;

type Pair = RedisClusterPair;

type NatMap = Record<string, { host: string; port: number }>;

let nodes: RedisHandle[];
const killed = new Set<number>();
const closers: Closers = [];

beforeAll(async () => {
  nodes = await startRedisCluster({
    masters: 3,
    replicasPerMaster: 1,
    args: [
      "--cluster-node-timeout",
      String(NODE_TIMEOUT_MS),
      "--cluster-replica-validity-factor",
      "0",
    ],
  });
}, TEST_MS);

afterAll(async () => await closeAll(closers));

/** The `index`th master and its replica, replicating through a proxy (the test kit's). */
async function pairAt(index: number): Promise<Pair> {
  const pair = await redisClusterPairThroughProxy(
    nodes.filter((n) => !killed.has(n.port)),
    index,
  );
  closers.push(() => pair.replication.close());
  return pair;
}

async function serviceOn(pair: Pair, prefix: string): Promise<string> {
  for (let i = 0; ; i++) {
    const name = `${prefix}-${process.pid}-${Date.now()}-${i}`;
    if (await redisKeyInSlots(pair.master.port, keysOf(name).leases, pair.slots)) return name;
  }
}

/**
 * A Cluster client over the nodes still running; `natMap` moves addresses; closed with the file.
 */
function clusterClient(natMap?: NatMap): Cluster {
  const c = new Cluster(
    nodes.filter((n) => !killed.has(n.port)).map((n) => ({ host: "127.0.0.1", port: n.port })),
    {
      natMap,
      maxRedirections: 16,
      // A slot map taken while the cluster changes is fixed within a second.
      slotsRefreshInterval: 1000,
      clusterRetryStrategy: () => 100,
      retryDelayOnFailover: 100,
      retryDelayOnClusterDown: 100,
      redisOptions: { maxRetriesPerRequest: 1, connectTimeout: 1000 },
    },
  );
  c.on("error", () => {});
  closers.push(async () => c.disconnect());
  return c;
}

/** A's client and W's: the master's announced address (the proxy) leads to the master itself. */
function directTo(pair: Pair): NatMap {
  return {
    [`127.0.0.1:${pair.replication.port}`]: { host: "127.0.0.1", port: pair.master.port },
  };
}

/**
 * The failover itself: cut the replication, A takes id 0 on the master and issues (with renewals
 * and reports confirmed), the master is SIGKILLed, the cluster promotes the replica, B asks for
 * the id through a Cluster client and issues.
 */
async function failOverUnderA(pair: Pair, service: string): Promise<HandOver> {
  expect(await redisReplicaInSync(pair.replica.port, pair.replication.port)).toBe(true);
  pair.replication.cutOff();
  // A reaches the master directly and the replica only through a cut proxy: partitioned from it.
  const aToReplica = await TcpProxy.start({ targetPort: pair.replica.port });
  closers.push(() => aToReplica.close());
  aToReplica.cutOff();
  const aClient = clusterClient({
    ...directTo(pair),
    [`127.0.0.1:${pair.replica.port}`]: { host: "127.0.0.1", port: aToReplica.port },
  });
  const a = await takeAndIssue(worker(failoverRegistry(aClient, closers), service, 1, closers));
  // The master confirmed A's grant and renewals; the replica has none of them.
  expect(await redisReplicaCommand(pair.replica.port, "HEXISTS", keysOf(service).leases, "0")).toBe(
    0,
  );

  const killedAt = performance.now();
  await pair.master.kill();
  killed.add(pair.master.port);
  // Every node still running must route the slots to R before B asks: ioredis takes the slot map
  // from whichever node it asks first, and a stale one would send B to the dead master's address.
  await waitUntil(
    "every node still running to see the replica serve the master's slots",
    async () => {
      const live = nodes.filter((n) => !killed.has(n.port));
      for (const node of live) {
        const owner = (await redisClusterNodes(node.port)).find(
          (n) => n.port === pair.replica.port,
        );
        const state = String(await redisCommand(node.port, "CLUSTER", "INFO"));
        if (owner?.role !== "master" || owner.slots.join(" ") !== pair.slots.join(" ")) {
          return false;
        }
        if (!/cluster_state:ok/.test(state)) return false;
      }
      return true;
    },
    60_000,
  );
  // A promotion, as Redis tells it to the takeover check.
  expect(await redisInfoField(pair.replica.port, "replication", "second_repl_offset")).not.toBe(
    "-1",
  );
  const promotedAt = performance.now();
  expect(a.lease.lost.aborted).toBe(false); // A is still issuing: the dangerous window is open

  const b = await takeOver(
    a,
    worker(failoverRegistry(clusterClient(), closers), service, 2, closers),
  );
  const s = (ms: number) => `${(ms / 1000).toFixed(1)} s`;
  console.log(
    `cluster failover of ${service}: replica promoted ${s(promotedAt - killedAt)} after the kill; ` +
      `A fenced ${s(a.lostAt - killedAt)} after it, ${s(b.grantedAt - a.lostAt)} before B's grant; ` +
      `B waited ${s(b.grantedAt - b.askedAt)}; A ${a.ids.length} ids, B ${b.ids.length} ids`,
  );
  return { a, b, marker: await markerOf(pair.replica.port, service) };
}

describe("registry-redis across a real Redis Cluster failover that loses writes", () => {
  it(
    "a promoted replica that never saw the name: detected as promoted, A fences before B gets the id",
    async () => {
      const pair = await pairAt(0);
      await olderThan(pair.master.port, FAILOVER_LEASE_MS);
      await olderThan(pair.replica.port, FAILOVER_LEASE_MS);
      const service = await serviceOn(pair, "cluster-promoted");
      expect(await redisReplicaCommand(pair.replica.port, "EXISTS", keysOf(service).marker)).toBe(
        0,
      );

      const o = await failOverUnderA(pair, service);
      expectSafeHandOver(o.a, o.b, o.marker);
      expect(o.marker.reason).toBe("promoted");
    },
    TEST_MS,
  );

  it(
    "a promoted replica with the old master's marker and stamps: detected by the run id, A fences before B gets the id",
    async () => {
      const pair = await pairAt(1);
      await olderThan(pair.master.port, FAILOVER_LEASE_MS);
      await olderThan(pair.replica.port, FAILOVER_LEASE_MS);
      const service = await serviceOn(pair, "cluster-marked");
      // An earlier holder W used id 0 and released it; the replica has the marker and W's stamp.
      const w = worker(
        failoverRegistry(clusterClient(directTo(pair)), closers),
        service,
        3,
        closers,
      );
      const idsW = await useAndRelease(w, service, (command, ...args) =>
        redisReplicaCommand(pair.replica.port, command, ...args),
      );
      const markedBy = await redisReplicaCommand(
        pair.replica.port,
        "HGET",
        keysOf(service).marker,
        "run_id",
      );
      const masterRunId = await redisInfoField(pair.master.port, "server", "run_id");

      const o = await failOverUnderA(pair, service);
      expectSafeHandOver(o.a, o.b, o.marker);
      expectNoDuplicates([...idsW, ...o.a.ids, ...o.b.ids]);
      expect(masterRunId).toMatch(/^[0-9a-f]{40}$/);
      expect(markedBy).toBe(masterRunId);
      expect(o.marker.reason).toBe("restarted");
    },
    TEST_MS,
  );
});
