import { afterAll, describe, expect, it } from "vitest";
import {
  type RedisHandle,
  redisClusterNodes,
  redisClusterPairThroughProxy,
  redisCommand,
  redisInfoField,
  redisKeyInSlots,
  redisReplicaCommand,
  redisReplicaInSync,
  startRedisCluster,
  TestkitError,
  waitUntil,
} from "../src/index";

const started: RedisHandle[] = [];

afterAll(async () => {
  await Promise.all(started.map((n) => n.dispose()));
});

describe("startRedisCluster", () => {
  it("starts masters with replicas: masters first, each replica in sync with its own master", async () => {
    const nodes = await startRedisCluster({
      masters: 3,
      replicasPerMaster: 1,
      args: ["--cluster-node-timeout", "4000"],
    });
    started.push(...nodes);
    expect(nodes).toHaveLength(6);
    const view = await redisClusterNodes(nodes[0]!.port);
    expect(view).toHaveLength(6);
    const masters = nodes.slice(0, 3).map((n) => view.find((v) => v.port === n.port)!);
    const replicas = nodes.slice(3).map((n) => view.find((v) => v.port === n.port)!);
    for (const master of masters) {
      expect(master.role).toBe("master");
      expect(master.slots.length).toBeGreaterThan(0);
    }
    const followed = new Set<string>();
    for (const [i, replica] of replicas.entries()) {
      expect(replica.role).toBe("replica");
      expect(replica.slots).toEqual([]);
      const master = masters.find((m) => m.id === replica.masterId)!;
      expect(master).toBeDefined();
      followed.add(master.id);
      expect(await redisReplicaInSync(nodes[3 + i]!.port, master.port)).toBe(true);
    }
    expect(followed.size).toBe(3);
    // The extra arguments reach every node.
    for (const node of nodes) {
      expect(await redisCommand(node.port, "CONFIG", "GET", "cluster-node-timeout")).toEqual([
        "cluster-node-timeout",
        "4000",
      ]);
      expect(await redisInfoField(node.port, "cluster", "cluster_enabled")).toBe("1");
    }
  });

  it("refuses fewer than three masters or a negative replica count, naming the value", async () => {
    await expect(startRedisCluster(2)).rejects.toThrow(
      /masters 2 is not valid: expected an integer of 3 or more/,
    );
    await expect(startRedisCluster({ replicasPerMaster: -1 })).rejects.toThrow(
      /replicasPerMaster -1 is not valid/,
    );
    await expect(startRedisCluster(2)).rejects.toMatchObject({ code: "TESTKIT_BAD_OPTION" });
    await expect(startRedisCluster(2)).rejects.toBeInstanceOf(TestkitError);
  });
});

describe("redisClusterPairThroughProxy", () => {
  it("makes a master's replica replicate through a proxy that cuts it off, and reads the replica", async () => {
    const nodes = await startRedisCluster({ masters: 3, replicasPerMaster: 1 });
    started.push(...nodes);
    const pair = await redisClusterPairThroughProxy(nodes, 1);
    try {
      expect(pair.slots[0]).toMatch(/^\d+-\d+$/);
      expect(await redisReplicaInSync(pair.replica.port, pair.replication.port)).toBe(true);
      // A key of the pair's slots, written on the master, reaches the replica through the proxy.
      let key = "";
      for (let i = 0; !(await redisKeyInSlots(pair.master.port, key, pair.slots)); i++) {
        key = `k${i}`;
      }
      expect(await redisCommand(pair.master.port, "SET", key, "before")).toBe("OK");
      await waitUntil(
        "the write to reach the replica",
        async () => (await redisReplicaCommand(pair.replica.port, "GET", key)) === "before",
      );
      // Cut: a later write never reaches the replica.
      pair.replication.cutOff();
      expect(await redisCommand(pair.master.port, "SET", key, "after")).toBe("OK");
      await new Promise((resolve) => setTimeout(resolve, 500));
      expect(await redisReplicaCommand(pair.replica.port, "GET", key)).toBe("before");
    } finally {
      await pair.replication.close();
    }
    await expect(redisClusterPairThroughProxy(nodes, 5)).rejects.toThrow(
      /no master 5 with a replica among the 6 nodes given/,
    );
  });
});
