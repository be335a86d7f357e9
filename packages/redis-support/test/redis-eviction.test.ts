// Judging a Redis's eviction settings for an adapter's keys (reading them is tested against real
// Redis servers in registry-redis's and redis-sequence's eviction tests).
import { describe, expect, it } from "vitest";
import { judgeRedisEviction, policyMayEvict, type RedisEvictionSettings } from "../src/index";

const context = {
  component: "registry-x",
  where: "redis://10.0.0.5:6379",
  keysExpire: false,
  consequence: "a lease: another node can be granted a held id",
};
const read = (policy: string, maxmemory = 0): RedisEvictionSettings => ({
  policy,
  maxmemory,
  source: "CONFIG GET",
});

describe("judgeRedisEviction", () => {
  it("finds allkeys-* evicting always, volatile-* only for keys with a TTL, noeviction never", () => {
    expect(policyMayEvict("allkeys-lru", false)).toBe(true);
    expect(policyMayEvict("allkeys-random", false)).toBe(true);
    expect(policyMayEvict("volatile-lru", false)).toBe(false);
    expect(policyMayEvict("volatile-ttl", true)).toBe(true);
    expect(policyMayEvict("noeviction", true)).toBe(false);
    expect(policyMayEvict("some-future-policy", false)).toBe(true);
  });

  it("names the policy, maxmemory, where it was read and the setting to change", () => {
    const finding = judgeRedisEviction([read("noeviction"), read("allkeys-lru", 1 << 20)], context);
    expect(finding).toMatchObject({ kind: "evicting" });
    expect(finding!.message).toBe(
      "[leaf] [registry-x] Redis at redis://10.0.0.5:6379 has maxmemory-policy allkeys-lru " +
        "(maxmemory 1048576, read by CONFIG GET): once memory is full it may evict a lease: another " +
        "node can be granted a held id. Set maxmemory-policy noeviction on every master (CONFIG SET " +
        "maxmemory-policy noeviction, and in redis.conf or the service's parameter group)",
    );
  });

  it("says when the policy could not be read, and why", () => {
    const finding = judgeRedisEviction(
      [
        read("noeviction"),
        {
          policy: undefined,
          maxmemory: undefined,
          source: undefined,
          unreadable: "CONFIG GET: ERR unknown command; INFO memory: NOPERM",
        },
      ],
      context,
    );
    expect(finding).toMatchObject({ kind: "unreadable" });
    expect(finding!.message).toContain("could not read maxmemory-policy (CONFIG GET: ERR unknown");
    expect(finding!.message).toContain("Make sure maxmemory-policy is noeviction");
  });

  it("finds nothing when every server keeps the keys", () => {
    expect(judgeRedisEviction([read("noeviction"), read("volatile-lru", 1 << 20)], context)).toBe(
      undefined,
    );
  });
});
