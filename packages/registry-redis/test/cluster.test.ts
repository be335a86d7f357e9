// Redis Cluster: three masters started through the test kit with --cluster-enabled. Every key of a
// service name carries the hash tag {name}, so each script touches one slot on one master.
import { spawnSync } from "node:child_process";
import { freePort, type RedisHandle, startRedis } from "@leaf/testkit";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { RedisRegistry, registryKeys } from "../src/index";

const nodes: RedisHandle[] = [];

beforeAll(async () => {
  for (let i = 0; i < 3; i++) {
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
  if (created.status !== 0)
    throw new Error(`redis-cli --cluster create failed: ${created.stdout}${created.stderr}`);
  for (let attempt = 0; ; attempt++) {
    const states = await Promise.all(
      nodes.map(async (node) => {
        const client = new Redis(node.url, { lazyConnect: true });
        try {
          await client.connect();
          return /cluster_state:ok/.test(await client.cluster("INFO"));
        } finally {
          client.disconnect();
        }
      }),
    );
    if (states.every(Boolean)) break;
    if (attempt > 100) throw new Error("the test cluster did not reach cluster_state:ok");
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
});

afterAll(async () => {
  await Promise.all(nodes.map((n) => n.dispose()));
});

describe("Redis Cluster", () => {
  it("leases distinct worker ids for several names from node URLs, each name's keys in one slot", async () => {
    const registry = new RedisRegistry({ url: nodes.map((n) => n.url), leaseMs: 2000 });
    const names = ["alpha", "beta", "gamma", "delta"].map((n) => `${n}-${Date.now()}`);
    for (const name of names) {
      const leases = await Promise.all(
        [1, 2, 3].map((port) =>
          registry.acquire({ node: { name, ip: "10.0.0.1", port }, maxWorkerId: 7, backups: 1 }),
        ),
      );
      const ids = leases.flatMap((l) => [l.workerId, ...l.backups.map((b) => b.workerId)]);
      expect(new Set(ids).size).toBe(6);
      for (const lease of leases) await lease.release(Date.now());
      const keys = Object.values(registryKeys("leaf:registry:", name));
      const slots = new Set<number>();
      const probe = new Redis(nodes[0]!.url);
      for (const key of keys) slots.add(Number(await probe.cluster("KEYSLOT", key)));
      probe.disconnect();
      expect(slots.size).toBe(1);
    }
    await registry.close();
  });
});
