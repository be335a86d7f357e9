// A Redis Cluster for tests: private Redis servers started with --cluster-enabled (each with its own
// bus port), joined by `redis-cli --cluster create` with no replicas, and returned once every node
// reports cluster_state:ok. Dispose each handle (or call stopAll) to stop them.
import { spawnSync } from "node:child_process";
import { Redis } from "ioredis";
import { TestkitError } from "./errors";
import { freePort } from "./ports";
import { startRedis } from "./redis";
import type { RedisHandle } from "./types";

/** Starts `masters` (default 3) Redis servers as one cluster; resolves when it serves. */
export async function startRedisCluster(masters = 3): Promise<RedisHandle[]> {
  const nodes: RedisHandle[] = [];
  for (let i = 0; i < masters; i++) {
    const busPort = await freePort();
    nodes.push(
      await startRedis({
        useEnv: false,
        args: ["--cluster-enabled", "yes", "--cluster-port", String(busPort)],
      }),
    );
  }
  const created = spawnSync(
    "redis-cli",
    [
      "--cluster",
      "create",
      ...nodes.map((n) => `127.0.0.1:${n.port}`),
      "--cluster-replicas",
      "0",
      "--cluster-yes",
    ],
    { encoding: "utf8", timeout: 30_000 },
  );
  if (created.status !== 0) {
    await Promise.all(nodes.map((n) => n.dispose()));
    throw new TestkitError(
      "TESTKIT_START_FAILED",
      `redis-cli --cluster create failed: ${created.stdout}${created.stderr}`,
    );
  }
  for (let attempt = 0; attempt < 100; attempt++) {
    const states = await Promise.all(nodes.map(clusterOk));
    if (states.every(Boolean)) return nodes;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  await Promise.all(nodes.map((n) => n.dispose()));
  throw new TestkitError("TESTKIT_START_FAILED", "the test cluster did not reach cluster_state:ok");
}

async function clusterOk(node: RedisHandle): Promise<boolean> {
  const client = new Redis(node.url, { lazyConnect: true });
  try {
    await client.connect();
    return /cluster_state:ok/.test(await client.cluster("INFO"));
  } finally {
    client.disconnect();
  }
}
