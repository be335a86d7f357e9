// The published conformance suite, unchanged, against RedisRegistry on a real Redis.
import { registryConformance } from "@leaf/conformance/registry";
import { type RedisHandle, startRedis, stopAll } from "@leaf/testkit";
import { Redis } from "ioredis";
import { afterAll, beforeAll, test } from "vitest";
import { type RedisLease, RedisRegistry } from "../src/index";

let redis: RedisHandle;
let admin: Redis;

beforeAll(async () => {
  redis = await startRedis();
  admin = new Redis(redis.url);
});

afterAll(async () => {
  admin?.disconnect();
  await stopAll();
});

registryConformance(test, {
  name: "registry-redis",
  create: async () => new RedisRegistry({ url: redis.url, leaseMs: 5000 }),
  backups: true,
  requestedWorkerId: true,
  leaseLoss: {
    // The id is handed to another token behind the holder's back: its next renewal finds out.
    induce: async (lease) => {
      const { keys, workerId } = lease as RedisLease;
      const raw = await admin.hget(keys.leases, String(workerId));
      const record = JSON.parse(raw!) as Record<string, string>;
      await admin.hset(keys.leases, String(workerId), JSON.stringify({ ...record, t: "intruder" }));
    },
    waitMs: 20_000,
  },
});
