// Snowflake mode on the etcd registry: two servers of one service get distinct worker ids from a
// real etcd, the monitor and /metrics show the registry and its lease state, an etcd stopped
// (SIGSTOP) past the lease TTL fences the node (ids refused, "lease lost"), and bad keys are refused.
import { performance } from "node:perf_hooks";
import { layouts } from "@leaf/core";
import { type EtcdHandle, startEtcd, stopAll } from "@leaf/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadConfig } from "../src/index";
import { get, startTestServer, type TestServer } from "./helpers";

const TTL_SECONDS = 2;
let etcd: EtcdHandle;
const servers: TestServer[] = [];
const name = `etcd-registry-${process.pid}-${Date.now()}`;

function serverWith(port: number): Promise<TestServer> {
  return startTestServer({
    name,
    segment: { enabled: false },
    snowflake: {
      registry: "etcd",
      port,
      etcd: { url: etcd.url, prefix: "/server-test", leaseTtlSeconds: TTL_SECONDS },
    },
  });
}

beforeAll(async () => {
  etcd = await startEtcd({ useEnv: false });
  servers.push(await serverWith(18091), await serverWith(18092));
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

describe("the server on the etcd registry", () => {
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
      expect(state.snowflake).toMatchObject({ registry: "etcd", registryState: "connected" });
      expect(state.capacity.workerIds).toMatchObject({
        registry: "etcd",
        mode: "lease",
        reused: true,
      });
    }
    expect(ids.size).toBe(1000);
    expect(new Set(workerIds).size).toBe(2);
    const metrics = (await get(servers[0]!.server, "/metrics")).body;
    expect(metrics).toContain('leaf_snowflake_registry_up{registry="etcd"} 1');
    expect(metrics).toContain('leaf_snowflake_lease_state{state="held"} 1');
  });

  it("fences the node when etcd is stopped past the lease TTL: ids refused, lease lost shown", async () => {
    const test = servers[0]!;
    etcd.pause();
    try {
      const until = performance.now() + TTL_SECONDS * 10_000;
      while ((await monitor(test)).snowflake.registryState !== "lease lost") {
        if (performance.now() > until) throw new Error("the node did not fence");
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      const refused = await get(test.server, "/api/v1/snowflake/id");
      expect(refused.statusCode).toBeGreaterThanOrEqual(500);
      expect(refused.body).toContain("LEASE_LOST");
      const metrics = (await get(test.server, "/metrics")).body;
      expect(metrics).toContain('leaf_snowflake_registry_up{registry="etcd"} 0');
      expect(metrics).toContain('leaf_snowflake_lease_state{state="fenced"} 1');
    } finally {
      etcd.resume();
    }
  });

  it("refuses the etcd registry without a URL, and a bad URL, prefix or TTL", () => {
    const load = (snowflake: Record<string, unknown>) => {
      try {
        loadConfig({ values: { snowflake }, env: {} });
      } catch (error) {
        return (error as Error).message;
      }
      return "";
    };
    expect(load({ registry: "etcd" })).toContain("missing snowflake.etcd.url");
    expect(load({ registry: "etcd", etcd: { url: "127.0.0.1:2379" } })).toContain(
      "snowflake.etcd.url",
    );
    expect(
      load({ registry: "etcd", etcd: { url: "http://127.0.0.1:2379", prefix: "leaf/" } }),
    ).toContain("snowflake.etcd.prefix");
    expect(
      load({ registry: "etcd", etcd: { url: "http://127.0.0.1:2379", leaseTtlSeconds: 0 } }),
    ).toContain("snowflake.etcd.leaseTtlSeconds");
    expect(
      load({ registry: "etcd", etcd: { url: "http://127.0.0.1:2379,http://127.0.0.1:2380" } }),
    ).not.toContain("snowflake.etcd");
  });
});
