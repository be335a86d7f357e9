// The Redis pieces every Redis adapter shares: URLs read and redacted, one server or the nodes of a
// cluster, and the time limit. (Scripts by SHA with the NOSCRIPT fallback run against a real Redis in
// the tests of @leaf/redis-sequence and @leaf/registry-redis.)

import { ErrorCodes, LeafError } from "@leaf/core";
import { describe, expect, it } from "vitest";
import {
  describeRedisUrl,
  luaScript,
  parseRedisUrl,
  planRedis,
  REDIS_CLUSTER_SLOTS_REFRESH_MS,
  redisClusterDefaults,
  redisFailurePhrase,
  TimeLimitError,
  withTimeLimit,
} from "../src/index";

const where = { component: "test", key: "url" };

function refusal(fn: () => unknown): LeafError {
  try {
    fn();
  } catch (error) {
    if (error instanceof LeafError) return error;
    throw error;
  }
  throw new Error("expected a LeafError");
}

describe("Redis URLs", () => {
  it("reads redis:// and rediss:// URLs and hides credentials when describing them", () => {
    const url = parseRedisUrl("rediss://app:s3cret@cache.internal:6380/2", where);
    expect(describeRedisUrl(url)).toBe("rediss://***@cache.internal:6380/2");
    expect(describeRedisUrl(parseRedisUrl("redis://127.0.0.1:6379", where))).toBe(
      "redis://127.0.0.1:6379",
    );
  });

  it("refuses anything else with INVALID_CONFIG naming the key, never showing a password", () => {
    for (const value of ["localhost:6379", "http://h:1", "redis://", 6379, undefined]) {
      const error = refusal(() => parseRedisUrl(value, where));
      expect(error.code).toBe(ErrorCodes.INVALID_CONFIG);
      expect(error.details).toMatchObject({ key: "url" });
    }
    const secret = refusal(() => parseRedisUrl("http://u:s3cret@h", where));
    expect(secret.message).not.toContain("s3cret");
  });

  it("plans one server from a string and a cluster from a list, with the first URL's credentials", () => {
    expect(planRedis("redis://127.0.0.1:7000", "test")).toEqual({
      kind: "single",
      url: "redis://127.0.0.1:7000",
      description: "redis://127.0.0.1:7000",
    });
    const cluster = planRedis(["rediss://u:p%40ss@a:7001", "redis://[::1]:7002", "redis://c"], "t");
    expect(cluster).toEqual({
      kind: "cluster",
      nodes: [
        { host: "a", port: 7001 },
        { host: "::1", port: 7002 },
        { host: "c", port: 6379 },
      ],
      auth: { username: "u", password: "p@ss", tls: {} },
      description: "cluster rediss://***@a:7001,redis://[::1]:7002,redis://c",
    });
    expect(refusal(() => planRedis([], "t")).details).toMatchObject({ key: "url" });
    expect(refusal(() => planRedis(["redis://a", "nope"], "t")).details).toMatchObject({
      key: "url[1]",
    });
  });

  it("gives a script its SHA-1, as Redis computes it", () => {
    // SHA-1 of "return 1", as SCRIPT LOAD answers it.
    expect(luaScript("return 1").sha).toBe("e0e1f9fabfc9d4800c877a703b823ac0578ff8db");
  });

  it("rejects a round trip past its time limit with TimeLimitError naming what waited", async () => {
    const never = new Promise<never>(() => {});
    await expect(withTimeLimit(never, 20, "waiting for Redis")).rejects.toSatisfy(
      (e: unknown) =>
        e instanceof TimeLimitError && e.message === "no answer after 20 ms waiting for Redis",
    );
    await expect(withTimeLimit(Promise.resolve(7), 20, "x")).resolves.toBe(7);
  });
});

describe("redisClusterDefaults", () => {
  it("re-reads the slot map periodically (ioredis does not by default), and a caller's clusterOptions override it", () => {
    expect(redisClusterDefaults()).toEqual({
      lazyConnect: true,
      maxRedirections: 16,
      slotsRefreshInterval: REDIS_CLUSTER_SLOTS_REFRESH_MS,
    });
    expect(REDIS_CLUSTER_SLOTS_REFRESH_MS).toBe(2000);
    // The adapters spread the caller's clusterOptions over the defaults.
    const callers = { slotsRefreshInterval: 500, natMap: {} };
    expect({ ...redisClusterDefaults(), ...callers }).toMatchObject({
      slotsRefreshInterval: 500,
      maxRedirections: 16,
    });
  });

  it("returns a new object each time, so that a client's options never leak into another's", () => {
    const first = redisClusterDefaults();
    first.slotsRefreshInterval = 1;
    expect(redisClusterDefaults().slotsRefreshInterval).toBe(REDIS_CLUSTER_SLOTS_REFRESH_MS);
    expect(redisClusterDefaults()).not.toBe(redisClusterDefaults());
  });
});

describe("redisFailurePhrase", () => {
  // The first words of the errors Redis 7 sends for each refusal.
  const refusals = [
    "NOREPLICAS Not enough good replicas to write.",
    "READONLY You can't write against a read only replica.",
    "MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.",
    "MISCONF Redis is configured to save RDB snapshots, but it's currently unable to persist to disk.",
  ];

  it.each(refusals)("says Redis refused the write for %s", (reason) => {
    expect(redisFailurePhrase(reason, "connect ECONNREFUSED 127.0.0.1:1")).toBe(
      `refused the write (${reason}); it is not a master that may accept writes now`,
    );
  });

  it("says Redis did not answer otherwise, with the last connection error when it adds something", () => {
    expect(redisFailurePhrase("Connection is closed.", "connect ECONNREFUSED 127.0.0.1:1")).toBe(
      "did not answer (Connection is closed.; last connection error: connect ECONNREFUSED 127.0.0.1:1); check that it runs and is reachable",
    );
    expect(redisFailurePhrase("Connection is closed.", "Connection is closed.")).toBe(
      "did not answer (Connection is closed.); check that it runs and is reachable",
    );
    // A refusal's word inside another kind of error is not a refusal.
    expect(redisFailurePhrase("ERR unknown command 'READONLY'")).toMatch(/^did not answer/);
  });

  it("says Redis refused the credentials when the command or the last connection error says so", () => {
    expect(
      redisFailurePhrase(
        "Connection is closed.",
        "WRONGPASS invalid username-password pair or user is disabled.",
      ),
    ).toBe(
      "refused the credentials (WRONGPASS invalid username-password pair or user is disabled.); check the user and password in the URL",
    );
    expect(redisFailurePhrase("NOAUTH Authentication required.")).toMatch(
      /^refused the credentials \(NOAUTH Authentication required\.\)/,
    );
    expect(redisFailurePhrase("Connection is closed.", "ERR invalid password")).toMatch(
      /^refused the credentials/,
    );
    // The words inside another error are not a refusal of the credentials.
    expect(redisFailurePhrase("ERR unknown command 'NOAUTH'")).toMatch(/^did not answer/);
  });

  it("reads Redis 6's wrapping of a script's refusal", () => {
    const reason =
      "ERR Error running script (call to f_2b4c6d): @user_script:1: @user_script: 1: -READONLY You can't write against a read only replica. ";
    expect(redisFailurePhrase(reason)).toMatch(/^refused the write/);
  });
});
