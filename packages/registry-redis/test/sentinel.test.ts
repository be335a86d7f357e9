// Sentinel: a real redis-sentinel (`redis-server --sentinel`) watching the test kit's Redis; the
// registry is given an ioredis client that finds the master through Sentinel.
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freePort, type RedisHandle, redisCommand, startRedis, stopAll } from "@leaf/testkit";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { RedisRegistry } from "../src/index";

let redis: RedisHandle;
let sentinel: ChildProcess | undefined;
let sentinelPort: number;
const dir = mkdtempSync(join(tmpdir(), "leaf-sentinel-"));

beforeAll(async () => {
  redis = await startRedis({ useEnv: false });
  sentinelPort = await freePort();
  const config = join(dir, "sentinel.conf");
  writeFileSync(
    config,
    [
      `port ${sentinelPort}`,
      "bind 127.0.0.1",
      `dir ${dir}`,
      `sentinel monitor leafmaster 127.0.0.1 ${redis.port} 1`,
      "sentinel down-after-milliseconds leafmaster 5000",
      "",
    ].join("\n"),
  );
  sentinel = spawn("redis-server", [config, "--sentinel"], { stdio: "ignore" });
  // Ready once Sentinel names the master.
  for (let attempt = 0; ; attempt++) {
    const master = (await redisCommand(
      sentinelPort,
      "SENTINEL",
      "get-master-addr-by-name",
      "leafmaster",
    )) as string[] | null | undefined;
    if (master?.[1] === String(redis.port)) break;
    if (attempt > 100) throw new Error("redis-sentinel did not start");
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
});

afterAll(async () => {
  sentinel?.kill("SIGKILL");
  await stopAll();
  rmSync(dir, { recursive: true, force: true });
});

describe("Sentinel", () => {
  it("leases distinct worker ids through a client that finds the master through Sentinel", async () => {
    const client = new Redis({
      sentinels: [{ host: "127.0.0.1", port: sentinelPort }],
      name: "leafmaster",
    });
    const registry = new RedisRegistry({ client, leaseMs: 2000 });
    const name = `sentinel-${Date.now()}`;
    const first = await registry.acquire({
      node: { name, ip: "10.0.0.1", port: 1 },
      maxWorkerId: 7,
    });
    const second = await registry.acquire({
      node: { name, ip: "10.0.0.2", port: 1 },
      maxWorkerId: 7,
    });
    expect([first.workerId, second.workerId].sort()).toEqual([0, 1]);
    await first.report(Date.now());
    await first.release();
    await second.release();
    await registry.close();
    // The leases went through the master Sentinel named: its keys are there.
    const direct = new Redis(redis.url);
    expect(await direct.hlen(`leaf:registry:{${name}}:stamps`)).toBe(2);
    direct.disconnect();
    client.disconnect();
  });
});
