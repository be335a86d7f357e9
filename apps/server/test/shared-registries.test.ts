// Snowflake mode on the registries with a remote store, Redis and etcd, one case each: two servers of
// one service get distinct worker ids from a real server, the monitor and /metrics show the registry
// and its lease state, the store paused (SIGSTOP) past the lease fences the node (ids refused, "lease
// lost"), and bad keys are refused when the configuration is read.
import { performance } from "node:perf_hooks";
import { layouts } from "@leaf/core";
import { startEtcd, startedRetrying, startRedis, stopAll } from "@leaf/testkit";
import { afterAll, describe, expect, it } from "vitest";
import { loadConfig } from "../src/index";
import { get, startTestServer, type TestServer } from "./helpers";

interface Store {
  url: string;
  pause(): void;
  resume(): void;
}

interface RegistryCase {
  kind: "redis" | "etcd";
  start(): Promise<Store>;
  /** The registry's keys for a store at `url`, with a short lease. */
  keys(url: string): Record<string, unknown>;
  /** How long the lease lasts, ms: the node must fence well within ten of these. */
  leaseMs: number;
  /** Bad `snowflake` values and the key each refusal must name. */
  refusals: Array<[Record<string, unknown>, string]>;
  /** Unusual `snowflake` values that must pass the registry's checks. */
  accepted: Array<Record<string, unknown>>;
}

const CASES: RegistryCase[] = [
  {
    kind: "redis",
    start: () => startRedis({ useEnv: false }),
    keys: (url) => ({ redis: { url, leaseMs: 3000 } }),
    leaseMs: 3000,
    refusals: [
      [{}, "missing snowflake.redis.url"],
      [{ redis: { url: "redis://127.0.0.1:1", keyPrefix: "a{b}" } }, "snowflake.redis.keyPrefix"],
      [{ redis: { url: "http://x" } }, "snowflake.redis.url"],
      [{ redis: { url: "redis://127.0.0.1:1", leaseMs: 10 } }, "snowflake.redis.leaseMs"],
    ],
    accepted: [],
  },
  {
    kind: "etcd",
    start: () => startEtcd({ useEnv: false }),
    keys: (url) => ({ etcd: { url, prefix: "/server-test", leaseTtlSeconds: 2 } }),
    leaseMs: 2000,
    refusals: [
      [{}, "missing snowflake.etcd.url"],
      [{ etcd: { url: "127.0.0.1:2379" } }, "snowflake.etcd.url"],
      [{ etcd: { url: "http://127.0.0.1:2379", prefix: "leaf/" } }, "snowflake.etcd.prefix"],
      [
        { etcd: { url: "http://127.0.0.1:2379", leaseTtlSeconds: 0 } },
        "snowflake.etcd.leaseTtlSeconds",
      ],
    ],
    accepted: [{ etcd: { url: "http://127.0.0.1:2379,http://127.0.0.1:2380" } }],
  },
];

afterAll(async () => {
  await stopAll();
});

async function monitor(test: TestServer) {
  return (await get(test.server, "/api/v1/monitor")).json() as {
    snowflake: { registry: string; registryState: string; workerId: number };
    capacity: { workerIds: { registry: string; mode: string; reused: boolean } };
  };
}

function configRefusal(snowflake: Record<string, unknown>): string {
  try {
    loadConfig({ values: { snowflake }, env: {} });
  } catch (error) {
    return (error as Error).message;
  }
  return "";
}

describe.each(CASES)("the server on the $kind registry", (c) => {
  const servers: TestServer[] = [];
  let store: Store;
  const name = `${c.kind}-registry-${process.pid}-${Date.now()}`;

  // A 2 s lease: on a starved machine the acquire itself may outlast it, and the start is refused
  // (UNAVAILABLE, "only -52 ms of the lease were left": the check doing its job); started again.
  const serverWith = (port: number) =>
    startedRetrying(
      () =>
        startTestServer({
          name,
          segment: { enabled: false },
          snowflake: { registry: c.kind, port, ...c.keys(store.url) },
        }),
      { codes: ["UNAVAILABLE"], deadline: Date.now() + 30_000, pauseMs: 200 },
    );

  afterAll(async () => {
    for (const s of servers) await s.stop().catch(() => {});
  });

  it("gives two nodes of one service distinct worker ids, and their ids are distinct", async () => {
    store = await c.start();
    servers.push(await serverWith(18081), await serverWith(18082));
    const ids = new Set<string>();
    const workerIds: number[] = [];
    for (const test of servers) {
      // A 2 s lease on a starved machine may lapse before the first request (LEASE_LOST, the
      // fence doing its job); the node takes one again: what is checked is two distinct ids.
      let answer = await get(test.server, "/api/v1/snowflake/ids?count=500");
      for (let tries = 1; answer.statusCode === 503 && tries < 20; tries++) {
        await new Promise((resolve) => setTimeout(resolve, 500));
        answer = await get(test.server, "/api/v1/snowflake/ids?count=500");
      }
      expect(answer.statusCode, answer.body).toBe(200);
      const body = answer.json() as { ids: string[] };
      for (const id of body.ids) ids.add(id);
      workerIds.push(layouts.leaf.decompose(BigInt(body.ids[0]!)).workerId);
      const state = await monitor(test);
      expect(state.snowflake).toMatchObject({ registry: c.kind, registryState: "connected" });
      expect(state.capacity.workerIds).toMatchObject({
        registry: c.kind,
        mode: "lease",
        reused: true,
      });
    }
    expect(ids.size).toBe(1000);
    expect(new Set(workerIds).size).toBe(2);
    const metrics = (await get(servers[0]!.server, "/metrics")).body;
    expect(metrics).toContain(`leaf_snowflake_registry_up{registry="${c.kind}"} 1`);
    expect(metrics).toContain('leaf_snowflake_lease_state{state="held"} 1');
  });

  it("fences the node when the store is paused past the lease: ids refused, lease lost shown", async () => {
    const test = servers[0]!;
    store.pause();
    try {
      const until = performance.now() + c.leaseMs * 10;
      while ((await monitor(test)).snowflake.registryState !== "lease lost") {
        if (performance.now() > until) throw new Error("the node did not fence");
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      const refused = await get(test.server, "/api/v1/snowflake/id");
      expect(refused.statusCode).toBeGreaterThanOrEqual(500);
      expect(refused.body).toContain("LEASE_LOST");
      const metrics = (await get(test.server, "/metrics")).body;
      expect(metrics).toContain(`leaf_snowflake_registry_up{registry="${c.kind}"} 0`);
      expect(metrics).toContain('leaf_snowflake_lease_state{state="fenced"} 1');
    } finally {
      store.resume();
    }
  });

  it("refuses a configuration without a URL, or with a bad key, naming the key", () => {
    for (const [values, key] of c.refusals) {
      expect(configRefusal({ registry: c.kind, ...values })).toContain(key);
    }
    for (const values of c.accepted) {
      expect(configRefusal({ registry: c.kind, ...values })).not.toContain(`snowflake.${c.kind}`);
    }
  });
});
