// Snowflake mode on the Redis registry: two servers of one service get distinct worker ids from a
// real Redis, the monitor and /metrics show the registry and its lease state, a Redis paused past
// the lease fences the node (ids refused, "lease lost"), and bad keys are refused at load.
import { performance } from "node:perf_hooks";
import { layouts } from "@leaf/core";
import { type RedisHandle, startRedis, stopAll } from "@leaf/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadConfig } from "../src/index";
import { get, startTestServer, type TestServer } from "./helpers";

const LEASE_MS = 3000;
let redis: RedisHandle;
const servers: TestServer[] = [];
const name = `redis-registry-${process.pid}-${Date.now()}`;

function serverWith(port: number): Promise<TestServer> {
  return startTestServer({
    name,
    segment: { enabled: false },
    snowflake: { registry: "redis", port, redis: { url: redis.url, leaseMs: LEASE_MS } },
  });
}

beforeAll(async () => {
  redis = await startRedis({ useEnv: false });
  servers.push(await serverWith(18081), await serverWith(18082));
});

afterAll(async () => {
  for (const s of servers) await s.stop().catch(() => {});
  await stopAll();
});

async function monitor(test: TestServer) {
  return (await get(test.server, "/api/v1/monitor")).json() as {
    snowflake: { registry: string; registryState: string; workerId: number };
    capacity: { workerIds: { registry: string; mode: string; reused: boolean } };
  };
}

describe("the server on the redis registry", () => {
  it("gives two nodes of one service distinct worker ids, and their ids are distinct", async () => {
    const ids = new Set<string>();
    const workerIds: number[] = [];
    for (const test of servers) {
      const body = (await get(test.server, "/api/v1/snowflake/ids?count=500")).json() as {
        ids: string[];
      };
      for (const id of body.ids) ids.add(id);
      workerIds.push(layouts.leaf.decompose(BigInt(body.ids[0]!)).workerId);
      const state = await monitor(test);
      expect(state.snowflake).toMatchObject({ registry: "redis", registryState: "connected" });
      expect(state.capacity.workerIds).toMatchObject({
        registry: "redis",
        mode: "lease",
        reused: true,
      });
    }
    expect(ids.size).toBe(1000);
    expect(new Set(workerIds).size).toBe(2);
    const metrics = (await get(servers[0]!.server, "/metrics")).body;
    expect(metrics).toContain('leaf_snowflake_registry_up{registry="redis"} 1');
    expect(metrics).toContain('leaf_snowflake_lease_state{state="held"} 1');
  });

  it("fences the node when Redis is paused past the lease: ids refused, lease lost shown", async () => {
    const test = servers[0]!;
    redis.pause();
    try {
      const until = performance.now() + LEASE_MS * 10;
      while ((await monitor(test)).snowflake.registryState !== "lease lost") {
        if (performance.now() > until) throw new Error("the node did not fence");
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      const refused = await get(test.server, "/api/v1/snowflake/id");
      expect(refused.statusCode).toBeGreaterThanOrEqual(500);
      expect(refused.body).toContain("LEASE_LOST");
      const metrics = (await get(test.server, "/metrics")).body;
      expect(metrics).toContain('leaf_snowflake_registry_up{registry="redis"} 0');
      expect(metrics).toContain('leaf_snowflake_lease_state{state="fenced"} 1');
    } finally {
      redis.resume();
    }
  });

  it("refuses the redis registry without a URL, and a key prefix with braces", () => {
    const load = (snowflake: Record<string, unknown>) => {
      try {
        loadConfig({ values: { snowflake }, env: {} });
      } catch (error) {
        return (error as Error).message;
      }
      return "";
    };
    expect(load({ registry: "redis" })).toContain("missing snowflake.redis.url");
    expect(
      load({ registry: "redis", redis: { url: "redis://127.0.0.1:1", keyPrefix: "a{b}" } }),
    ).toContain("snowflake.redis.keyPrefix");
    expect(load({ registry: "redis", redis: { url: "http://x" } })).toContain(
      "snowflake.redis.url",
    );
    expect(
      load({ registry: "redis", redis: { url: "redis://127.0.0.1:1", leaseMs: 10 } }),
    ).toContain("snowflake.redis.leaseMs");
  });
});
