// Construction checks its options and does no I/O; the backend is a URL (client owned and closed)
// or the caller's client (left open); an unreachable Redis is UNAVAILABLE at the first acquire.
import { freePort, type RedisHandle, startRedis, stopAll } from "@leaf/testkit";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { RedisRegistry, registryKeys } from "../src/index";

let redis: RedisHandle;

beforeAll(async () => {
  redis = await startRedis();
});

afterAll(async () => {
  await stopAll();
});

const node = (name: string) => ({ name, ip: "10.0.0.1", port: 8080 });

describe("RedisRegistry options", () => {
  it.each([
    [{}, "url", /exactly one|url/],
    [{ url: "http://127.0.0.1:6379" }, "url", /Redis URL/],
    [{ url: [] }, "url", /at least one Redis Cluster node URL/],
    [
      { url: "redis://127.0.0.1:6379", client: new Redis({ lazyConnect: true }) },
      "client",
      /not both/,
    ],
    [{ client: { get() {} } }, "client", /ioredis/],
    [{ url: "redis://127.0.0.1:6379", leaseMs: 100 }, "leaseMs", /at least 500/],
    [
      { url: "redis://127.0.0.1:6379", leaseMs: 1000, safetyMarginMs: 1000 },
      "safetyMarginMs",
      /less than leaseMs/,
    ],
    [
      { url: "redis://127.0.0.1:6379", leaseMs: 1000, renewIntervalMs: 900 },
      "renewIntervalMs",
      /renewed before it fences/,
    ],
    [{ url: "redis://127.0.0.1:6379", keyPrefix: "a{b}:" }, "keyPrefix", /without \{ or \}/],
    [{ url: "redis://127.0.0.1:6379", toleranceMs: -1 }, "toleranceMs", /0 or more/],
    [
      { url: "redis://127.0.0.1:6379", evictionCheck: "ignore" },
      "evictionCheck",
      /"refuse" or "warn"/,
    ],
    [{ url: "redis://127.0.0.1:6379", onWarning: "log" }, "onWarning", /a function/],
  ])("refuses %j naming %s", (options, key, message) => {
    let caught: unknown;
    try {
      new RedisRegistry(options as never);
    } catch (error) {
      caught = error;
    }
    expect(caught).toMatchObject({ code: "INVALID_CONFIG", details: { key } });
    expect((caught as Error).message).toMatch(message);
    expect((caught as Error).message).toMatch(/^\[leaf\] \[registry-redis\]/);
  });

  it("does no I/O when built; an unreachable Redis is UNAVAILABLE at the first acquire", async () => {
    const port = await freePort();
    const registry = new RedisRegistry({ url: `redis://127.0.0.1:${port}`, commandTimeoutMs: 500 });
    expect(registry.redis).toBe(`redis://127.0.0.1:${port}`);
    await expect(registry.acquire({ node: node("nowhere"), maxWorkerId: 3 })).rejects.toMatchObject(
      {
        code: "UNAVAILABLE",
        message: expect.stringContaining(`Redis at redis://127.0.0.1:${port} did not answer`),
      },
    );
    await registry.close();
  });

  it("uses a client passed in and leaves it open on close", async () => {
    const client = new Redis(redis.url);
    const registry = new RedisRegistry({ client, leaseMs: 2000 });
    const lease = await registry.acquire({ node: node(`client-${Date.now()}`), maxWorkerId: 3 });
    await lease.release();
    await registry.close();
    expect(await client.ping()).toBe("PONG");
    client.disconnect();
  });

  it("keeps every key of a service name under one hash tag", () => {
    const keys = registryKeys("leaf:registry:", "orders");
    expect(Object.values(keys)).toEqual([
      "leaf:registry:{orders}:leases",
      "leaf:registry:{orders}:stamps",
      "leaf:registry:{orders}:marker",
    ]);
  });

  it("refuses a key of the registry that holds another kind of data with CORRUPT_DATA", async () => {
    const name = `corrupt-${Date.now()}`;
    const admin = new Redis(redis.url);
    await admin.set(registryKeys("leaf:registry:", name).leases, "not a hash");
    const registry = new RedisRegistry({ url: redis.url, leaseMs: 2000 });
    await expect(registry.acquire({ node: node(name), maxWorkerId: 3 })).rejects.toMatchObject({
      code: "CORRUPT_DATA",
    });
    await registry.close();
    admin.disconnect();
  });
});
