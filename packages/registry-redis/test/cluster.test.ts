// Redis Cluster: three masters started through the test kit with --cluster-enabled. Every key of a
// service name carries the hash tag {name}, so each script touches one slot on one master.
import { type RedisHandle, startRedisCluster } from "@leaf/testkit";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { RedisRegistry, registryKeys } from "../src/index";

const nodes: RedisHandle[] = [];

beforeAll(async () => {
  nodes.push(...(await startRedisCluster()));
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
