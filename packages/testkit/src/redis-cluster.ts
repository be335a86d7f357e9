// A Redis Cluster for tests: private Redis servers started with --cluster-enabled (each with its
// own bus port), joined by `redis-cli --cluster create` (with `replicasPerMaster` replicas of each
// master), and returned once every node reports cluster_state:ok, knows every other node, and every
// replica's link to its master is up. Dispose each handle (or call stopAll) to stop them.
import { spawnSync } from "node:child_process";
import { Redis } from "ioredis";
import { TestkitError } from "./errors";
import { freePort } from "./ports";
import { startRedis } from "./redis";
import { redisCommand, redisInfoField, redisReplicaInSync } from "./redis-command";
import { TcpProxy } from "./tcp-proxy";
import type { RedisHandle } from "./types";
import { waitUntil } from "./wait-until";

/** How startRedisCluster builds the cluster. */
export interface RedisClusterOptions {
  /** Masters, each serving a share of the 16384 slots: 3 at least (redis-cli's rule); default 3. */
  masters?: number;
  /** Replicas of each master (`--cluster-replicas`); default 0. */
  replicasPerMaster?: number;
  /** More redis-server arguments for every node, e.g. ["--cluster-node-timeout", "2000"]. */
  args?: string[];
}

/** One line of CLUSTER NODES. */
export interface RedisClusterNode {
  id: string;
  /** The client port the node announces (its own port unless `cluster-announce-port` is set). */
  port: number;
  role: "master" | "replica";
  /** The master's node id for a replica; undefined for a master. */
  masterId: string | undefined;
  /** The flags, e.g. ["myself", "master"], ["slave"], ["master", "fail"]. */
  flags: string[];
  /** Slot ranges served, as CLUSTER NODES prints them ("0-5460"); empty for a replica. */
  slots: string[];
}

/**
 * Starts a Redis Cluster and resolves with a handle on every node when it serves: `masters`
 * masters first, then their replicas. A number is `{ masters }` (the earlier signature).
 */
export async function startRedisCluster(
  options: number | RedisClusterOptions = {},
): Promise<RedisHandle[]> {
  const {
    masters = 3,
    replicasPerMaster = 0,
    args = [],
  } = typeof options === "number" ? { masters: options } : options;
  if (!Number.isInteger(masters) || masters < 3) {
    throw new TestkitError(
      "TESTKIT_BAD_OPTION",
      `startRedisCluster: masters ${masters} is not valid: expected an integer of 3 or more`,
    );
  }
  if (!Number.isInteger(replicasPerMaster) || replicasPerMaster < 0) {
    throw new TestkitError(
      "TESTKIT_BAD_OPTION",
      `startRedisCluster: replicasPerMaster ${replicasPerMaster} is not valid: expected an integer of 0 or more`,
    );
  }
  const total = masters * (1 + replicasPerMaster);
  const nodes: RedisHandle[] = [];
  for (let i = 0; i < total; i++) {
    const busPort = await freePort();
    nodes.push(
      await startRedis({
        useEnv: false,
        args: ["--cluster-enabled", "yes", "--cluster-port", String(busPort), ...args],
      }),
    );
  }
  // redis-cli makes the first `masters` nodes masters when all share one host.
  const created = spawnSync(
    "redis-cli",
    [
      "--cluster",
      "create",
      ...nodes.map((n) => `127.0.0.1:${n.port}`),
      "--cluster-replicas",
      String(replicasPerMaster),
      "--cluster-yes",
    ],
    { encoding: "utf8", timeout: 60_000 },
  );
  if (created.status !== 0) {
    await Promise.all(nodes.map((n) => n.dispose()));
    throw new TestkitError(
      "TESTKIT_START_FAILED",
      `redis-cli --cluster create failed: ${created.stdout}${created.stderr}`,
    );
  }
  try {
    await waitUntil(
      "the test cluster to serve (cluster_state:ok, every node known, replicas in sync)",
      async () => (await Promise.all(nodes.map((n) => nodeReady(n, total)))).every(Boolean),
      60_000,
      100,
    );
  } catch (error) {
    await Promise.all(nodes.map((n) => n.dispose()));
    throw new TestkitError(
      "TESTKIT_START_FAILED",
      `the test cluster did not come up: ${(error as Error).message}`,
    );
  }
  const roles = await Promise.all(nodes.map((n) => redisInfoField(n.port, "replication", "role")));
  return [
    ...nodes.filter((_, i) => roles[i] === "master"),
    ...nodes.filter((_, i) => roles[i] !== "master"),
  ];
}

/** The cluster as the node at `port` sees it (CLUSTER NODES); [] when it does not answer. */
export async function redisClusterNodes(port: number): Promise<RedisClusterNode[]> {
  const text = String((await redisCommand(port, "CLUSTER", "NODES")) ?? "");
  return text
    .split("\n")
    .filter((line) => line.trim() !== "")
    .map((line) => {
      const [id = "", address = "", flagText = "", master = "-", , , , , ...slots] =
        line.split(" ");
      const flags = flagText.split(",");
      return {
        id,
        port: Number(/:(\d+)/.exec(address)?.[1] ?? 0),
        role: flags.includes("slave") ? "replica" : "master",
        masterId: master === "-" ? undefined : master,
        flags,
        slots: slots.map((s) => s.trim()).filter(Boolean),
      };
    });
}

/** A master of a test cluster and its replica, which replicates through `replication`. */
export interface RedisClusterPair {
  master: RedisHandle;
  replica: RedisHandle;
  /** The master's slot ranges, as CLUSTER NODES prints them ("0-5460"). */
  slots: string[];
  /** The master's announced address: `cutOff()` and the replica hears nothing more from it. */
  replication: TcpProxy;
}

/**
 * The `index`th master of `nodes` (by its first slot) and its replica, the master announcing a TCP
 * proxy as its address (`cluster-announce-port`) so that the replica replicates through it: cut it
 * and the replica misses every later write, as when a master dies before its asynchronous
 * replication stream left it. Resolves once the replica is in sync through the proxy. The cluster
 * is read from the first of `nodes` that answers; close the proxy when done.
 */
export async function redisClusterPairThroughProxy(
  nodes: RedisHandle[],
  index: number,
): Promise<RedisClusterPair> {
  // The node read may not have heard of every replica yet (the cluster's gossip): read again for a
  // while before calling the pair missing.
  interface Found {
    masters: RedisClusterNode[];
    m?: RedisClusterNode;
    master?: RedisHandle;
    replica?: RedisHandle;
  }
  const pairIn = async (): Promise<Found> => {
    for (const node of nodes) {
      const view = await redisClusterNodes(node.port);
      if (view.length === 0) continue;
      const masters = view
        .filter((n) => n.role === "master" && n.slots.length > 0)
        .sort((x, y) => firstSlot(x.slots) - firstSlot(y.slots));
      const m = masters[index];
      const r = m && view.find((n) => n.masterId === m.id);
      const master = m && nodes.find((n) => n.port === m.port);
      const replica = r && nodes.find((n) => n.port === r.port);
      return { masters, m, master, replica };
    }
    return { masters: [] };
  };
  let found: Found = { masters: [] };
  await waitUntil(
    `master ${index} of the test cluster and its replica`,
    async () => {
      found = await pairIn();
      return found.replica !== undefined;
    },
    15_000,
    100,
  ).catch(() => undefined);
  const { m, master, replica, masters } = found;
  if (!m || !master || !replica) {
    throw new TestkitError(
      "TESTKIT_BAD_OPTION",
      `redisClusterPairThroughProxy: no master ${index} with a replica among the ${nodes.length} ` +
        `nodes given (the cluster lists ${masters.length} masters serving slots)`,
    );
  }
  const replication = await TcpProxy.start({ targetPort: master.port });
  try {
    const answer = await redisCommand(
      master.port,
      "CONFIG",
      "SET",
      "cluster-announce-port",
      String(replication.port),
    );
    if (answer !== "OK") {
      throw new TestkitError(
        "TESTKIT_NOT_RUNNING",
        `CONFIG SET cluster-announce-port on the Redis at port ${master.port} answered ` +
          `${String(answer)}, expected OK`,
      );
    }
    // The cluster bus tells the replica its master's new address; it reconnects through the proxy.
    await waitUntil("the replica to replicate through the proxy", () =>
      redisReplicaInSync(replica.port, replication.port),
    );
  } catch (error) {
    await replication.close();
    throw error;
  }
  return { master, replica, slots: m.slots, replication };
}

function firstSlot(ranges: string[]): number {
  return Number(/^\d+/.exec(ranges[0] ?? "")?.[0] ?? Number.POSITIVE_INFINITY);
}

/**
 * True when `key` hashes to a slot in `slots` (ranges as CLUSTER NODES prints them); asks `port`.
 */
export async function redisKeyInSlots(
  port: number,
  key: string,
  slots: string[],
): Promise<boolean> {
  const slot = Number(await redisCommand(port, "CLUSTER", "KEYSLOT", key));
  return slots.some((range) => {
    const [from, to = from] = range.split("-").map(Number);
    return slot >= from! && slot <= to!;
  });
}

/** `command` on the cluster replica at `port`, after READONLY (a replica redirects otherwise). */
export async function redisReplicaCommand(port: number, ...command: string[]): Promise<unknown> {
  const c = new Redis({ port, host: "127.0.0.1", lazyConnect: true, retryStrategy: () => null });
  c.on("error", () => {});
  try {
    await c.connect();
    await c.call("READONLY");
    return await c.call(command[0]!, ...command.slice(1));
  } finally {
    c.disconnect();
  }
}

async function nodeReady(node: RedisHandle, total: number): Promise<boolean> {
  const client = new Redis(node.url, { lazyConnect: true, retryStrategy: () => null });
  client.on("error", () => {});
  try {
    await client.connect();
    const info = await client.cluster("INFO");
    if (!/cluster_state:ok/.test(info)) return false;
    if (Number(/cluster_known_nodes:(\d+)/.exec(info)?.[1]) !== total) return false;
    if ((await redisInfoField(node.port, "replication", "role")) === "master") return true;
    return (await redisInfoField(node.port, "replication", "master_link_status")) === "up";
  } catch {
    return false;
  } finally {
    client.disconnect();
  }
}
