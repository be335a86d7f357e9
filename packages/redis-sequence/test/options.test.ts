// Bad configuration and bad arguments are refused before anything is sent to Redis.
import { ErrorCodes, isLeafError, type LeafError } from "@leaf/core";
import { describe, expect, it } from "vitest";
import { RedisSequence, type RedisSequenceOptions, sequenceKeys } from "../src/index";

const URL = "redis://127.0.0.1:1";

function refusal(options: Partial<RedisSequenceOptions>): LeafError {
  try {
    new RedisSequence({ url: URL, namespace: "orders", ...options } as RedisSequenceOptions);
  } catch (error) {
    if (isLeafError(error)) return error;
    throw error;
  }
  throw new Error(`options were accepted: ${JSON.stringify(options)}`);
}

describe("options", () => {
  it("refuses a namespace that is empty, too long, or would break the hash tag", () => {
    for (const namespace of [
      "",
      "has space",
      "a{b}",
      "{x}",
      "-leading",
      "x".repeat(129),
      7,
      undefined,
    ]) {
      const error = refusal({ namespace: namespace as string });
      expect(error.code).toBe(ErrorCodes.INVALID_CONFIG);
      expect(error.details.key).toBe("namespace");
      expect(error.message).toContain("namespace");
    }
  });

  it("refuses out-of-range numbers naming the key and the range", () => {
    const cases: [Partial<RedisSequenceOptions>, string][] = [
      [{ batchSize: 0 }, "batchSize"],
      [{ batchSize: 524_289 }, "batchSize"],
      [{ batchSize: 1.5 }, "batchSize"],
      [{ batchSize: 100, minBatchSize: 101 }, "minBatchSize"],
      [{ maxClockSkewMs: -1 }, "maxClockSkewMs"],
      [{ keyTtlSeconds: 3 }, "keyTtlSeconds"],
      [{ maxClockSkewMs: 10_000, keyTtlSeconds: 20 }, "keyTtlSeconds"],
      [{ lockMs: 0 }, "lockMs"],
      [{ refillTimeoutMs: Number.NaN }, "refillTimeoutMs"],
      [{ maxWaitMs: -5 }, "maxWaitMs"],
      [{ whenRedisDown: "retry" as never }, "whenRedisDown"],
      [{ timeSource: "ntp" as never }, "timeSource"],
      [{ sequenceScope: "global" as never }, "sequenceScope"],
      [{ keyPrefix: "{x}" }, "keyPrefix"],
      [{ timeZone: "America/New_York" }, "timeZone"],
    ];
    for (const [options, key] of cases) {
      const error = refusal(options);
      expect(error.code, key).toBe(ErrorCodes.INVALID_CONFIG);
      expect(error.details.key, key).toBe(key);
    }
    expect(refusal({ batchSize: 0 }).message).toContain("from 1 to 524,288");
  });

  it("refuses a url that is not a Redis URL, and a client that is not an ioredis client", () => {
    for (const url of ["localhost:6379", "http://127.0.0.1:6379", 6379, [], [URL, "nope"], {}]) {
      const error = refusal({ url: url as never });
      expect(error.code).toBe(ErrorCodes.INVALID_CONFIG);
      expect(String(error.details.key)).toMatch(/^url/);
    }
    for (const client of [{}, "redis://127.0.0.1:6379", { get() {} }]) {
      const error = refusal({ url: undefined, client: client as never });
      expect(error.details).toMatchObject({ key: "client" });
    }
    expect(refusal({ url: undefined }).details).toMatchObject({ key: "url" });
  });

  it("hides the password of a bad URL in the error", () => {
    const error = refusal({ url: "redis://user:secret@" });
    expect(error.message).not.toContain("secret");
  });

  it("refuses a shard outside the layout before touching Redis", async () => {
    const sequence = new RedisSequence({ url: URL, namespace: "orders" });
    try {
      for (const shard of [-1, 4096, 1.5, Number.NaN, "3", undefined]) {
        let error: unknown;
        try {
          sequence.tryNextIdSync(shard as number);
        } catch (caught) {
          error = caught;
        }
        expect(isLeafError(error, ErrorCodes.INVALID_ARGUMENT)).toBe(true);
        expect(String(error)).toContain("from 0 to 4095");
        await expect(sequence.nextId(shard as number)).rejects.toMatchObject({
          code: ErrorCodes.INVALID_ARGUMENT,
        });
      }
      await expect(sequence.nextIds(0, 0)).rejects.toMatchObject({
        code: ErrorCodes.INVALID_ARGUMENT,
      });
    } finally {
      await sequence.close();
    }
  });

  it("names every key with the namespace as the hash tag", () => {
    const keys = sequenceKeys("orders", "app:");
    expect(keys.sequence(1_800_000_000)).toBe("app:{orders}:seq:1800000000");
    expect(keys.sequence(1_800_000_000, 12)).toBe("app:{orders}:seq:1800000000:12");
    expect(keys.lock(1_800_000_000)).toBe("app:{orders}:lock:1800000000");
    expect(keys.marker()).toBe("app:{orders}:marker");
    for (const key of [keys.sequence(1), keys.lock(1, 3), keys.marker()]) {
      // The first {...} of a key is what Redis Cluster hashes.
      expect(/\{([^}]*)\}/.exec(key)?.[1]).toBe("orders");
    }
  });
});
