// The eviction-policy check at start, against real Redis servers started with each policy: counters
// have a TTL, so volatile-* policies may evict them as well as allkeys-* ones; the policy is read
// through INFO memory where CONFIG is disabled. A warning, not a refusal: an evicted counter's
// second is refused by the high-water second (README, Guarantees), so ids stop rather than repeat.
import { startRedis, stopAll } from "@leaf/testkit";
import { afterAll, describe, expect, it } from "vitest";
import { RedisSequence } from "../src/index";
import { freshNamespace, warningSink } from "./helpers";

afterAll(() => stopAll());

/** The eviction warnings a sequence gives at start on a Redis started with `args`. */
async function evictionWarnings(args: string[]) {
  const redis = await startRedis({ useEnv: false, args });
  const sink = warningSink();
  const sequence = new RedisSequence({
    url: redis.url,
    namespace: freshNamespace("evict"),
    onWarning: sink.onWarning,
  });
  try {
    await sequence.start();
    return {
      warnings: sink.warnings.filter((w) => w.type.startsWith("eviction-policy")),
      policies: sequence.state().redis.evictionPolicies,
    };
  } finally {
    await sequence.close();
    await redis.dispose();
  }
}

describe("the eviction-policy check at start", () => {
  it.each([
    ["volatile-lru", ["--maxmemory", "8mb"]],
    ["allkeys-lfu", ["--maxmemory", "8mb"]],
    ["volatile-ttl", ["--rename-command", "CONFIG", ""]],
  ])("warns about %s, naming the setting to change", async (policy, extra) => {
    const { warnings, policies } = await evictionWarnings(["--maxmemory-policy", policy, ...extra]);
    expect(policies).toEqual([policy]);
    expect(warnings.map((w) => w.type)).toEqual(["eviction-policy"]);
    const message = warnings[0]!.message;
    expect(message).toContain(`maxmemory-policy ${policy} (`);
    expect(message).toContain(
      extra[0] === "--rename-command" ? "read by INFO memory" : "read by CONFIG GET",
    );
    expect(message).toContain("Set maxmemory-policy noeviction");
    expect(message).toContain("ids stop rather than repeat");
  });

  it("says nothing under noeviction, also when CONFIG is disabled", async () => {
    const { warnings, policies } = await evictionWarnings([
      "--maxmemory",
      "8mb",
      "--rename-command",
      "CONFIG",
      "",
    ]);
    expect(policies).toEqual(["noeviction"]);
    expect(warnings).toEqual([]);
  });
});
