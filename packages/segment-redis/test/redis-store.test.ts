// The Redis store against the segment-store contract (the conformance suite and its durability
// part, unchanged) and its own rules: the namespace marker, exact ids past 2^53, tombstones kept in
// the marker, settings recorded with the namespace, the eviction check.
import {
  segmentStoreConformance,
  segmentStoreDurabilityConformance,
} from "@leaf/conformance/segment-store";
import { ErrorCodes, isLeafError } from "@leaf/core";
import { type RedisHandle, redisCommand, redisHash, startRedis } from "@leaf/testkit";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it, test } from "vitest";
import { RedisSegmentStore, type RedisSegmentStoreOptions } from "../src/index";
import { freshNamespace } from "./helpers";

let redis: RedisHandle;
const opened: RedisSegmentStore[] = [];

beforeAll(async () => {
  // A private server: the durability suite makes it refuse writes.
  redis = await startRedis({ useEnv: false });
});

afterAll(async () => {
  for (const store of opened) await store.close().catch(() => {});
  await redis?.dispose();
});

function storeFor(namespace: string, options: Partial<RedisSegmentStoreOptions> = {}) {
  const store = new RedisSegmentStore({ url: redis.url, namespace, ...options });
  opened.push(store);
  return store;
}

/** A store on a namespace created (once) for the test, as an operator does before the first use. */
async function created(namespace: string): Promise<RedisSegmentStore> {
  const store = storeFor(namespace);
  await store.createNamespace();
  return store;
}

segmentStoreConformance(test, {
  name: "redis store",
  create: ({ namespace }) => created(namespace),
  concurrentInstances: true,
  giveBack: true,
  floor: true,
  async editRow({ namespace }, tag, row) {
    const key = storeFor(namespace).keys.tag(tag);
    if (row.maxId !== undefined)
      await redisCommand(redis.port, "HSET", key, "max_id", `${row.maxId}`);
    if (row.step !== undefined) await redisCommand(redis.port, "HSET", key, "step", `${row.step}`);
  },
});

segmentStoreDurabilityConformance(test, {
  name: "redis store",
  create: ({ namespace }) => created(namespace),
  // Redis refuses every write (NOREPLICAS) while it has fewer good replicas than
  // min-replicas-to-write: a master cut off from its replicas.
  async induceWriteFault() {
    expect(await redisCommand(redis.port, "CONFIG", "SET", "min-replicas-to-write", "1")).toBe(
      "OK",
    );
    return {
      async end() {
        await redisCommand(redis.port, "CONFIG", "SET", "min-replicas-to-write", "0");
      },
    };
  },
});

describe("RedisSegmentStore", () => {
  it("refuses every call on a namespace without a marker, and serves once createNamespace() made it", async () => {
    const namespace = freshNamespace("new");
    const store = storeFor(namespace);
    const missing = (e: unknown) =>
      isLeafError(e, ErrorCodes.CORRUPT_DATA) &&
      e.details.takeover === "missing" &&
      e.message.includes("createNamespace()");
    await expect(store.listTags()).rejects.toSatisfy(missing);
    await expect(store.createTag({ tag: "orders", step: 10 })).rejects.toSatisfy(missing);
    await expect(store.takeRange("orders")).rejects.toSatisfy(missing);
    expect(await store.inspect()).toMatchObject({ exists: false, tags: 0 });
    expect(await store.createNamespace()).toBe(true);
    expect(await store.createNamespace()).toBe(false);
    await store.createTag({ tag: "orders", step: 10 });
    expect((await store.takeRange("orders")).start).toBe(1n);
    const state = await store.inspect();
    expect(state).toMatchObject({ exists: true, waitReplicas: 0, fence: undefined, tags: 1 });
    expect(state.runId).toBe(
      /run_id:(\w+)/.exec(String(await redisCommand(redis.port, "INFO", "server")))?.[1],
    );
  });

  it("keeps every id a decimal string in Redis, exact up to 2^63 - 1", async () => {
    const namespace = freshNamespace("exact");
    const store = await created(namespace);
    const max = (1n << 63n) - 1n;
    await store.createTag({ tag: "top", step: 3, startId: max - 7n });
    expect((await store.takeRange("top")).end).toBe(max - 4n);
    const range = await store.takeRange("top", 4);
    expect([range.start, range.end]).toEqual([max - 4n, max]);
    const row = await redisHash(redis.port, store.keys.tag("top"));
    expect(row.max_id).toBe("9223372036854775807");
    const marker = await redisHash(redis.port, store.keys.marker);
    expect(marker["t:top"]).toBe("9223372036854775807");
    await expect(store.takeRange("top", 1)).rejects.toSatisfy((e: unknown) =>
      isLeafError(e, ErrorCodes.TAG_EXHAUSTED),
    );
  });

  it("refuses a max id written with a leading zero or past 2^63 - 1 by hand, moving nothing", async () => {
    const namespace = freshNamespace("written");
    const store = await created(namespace);
    await store.createTag({ tag: "t", step: 10, startId: 0n });
    const key = store.keys.tag("t");
    for (const bad of ["010", "9223372036854775808", "1e3", " 5"]) {
      await redisCommand(redis.port, "HSET", key, "max_id", bad);
      await expect(store.takeRange("t")).rejects.toSatisfy(
        (e: unknown) =>
          isLeafError(e, ErrorCodes.CORRUPT_DATA) &&
          e.details.reason === "bad-max-id" &&
          e.message.includes(JSON.stringify(bad)),
      );
      expect((await redisHash(redis.port, key)).max_id).toBe(bad);
    }
  });

  it("refuses a store whose waitReplicas differs from the namespace's, naming both", async () => {
    const namespace = freshNamespace("settings");
    await created(namespace);
    const other = storeFor(namespace, { waitReplicas: 1 });
    await expect(other.takeRange("x")).rejects.toSatisfy(
      (e: unknown) =>
        isLeafError(e, ErrorCodes.INVALID_CONFIG) &&
        e.details.key === "waitReplicas" &&
        e.details.recorded === "0" &&
        e.details.configured === 1,
    );
    await expect(other.createNamespace()).rejects.toSatisfy((e: unknown) =>
      isLeafError(e, ErrorCodes.INVALID_CONFIG),
    );
  });

  it("keeps a deleted tag's max id in the marker, and a store opened later refuses to re-create it below", async () => {
    const namespace = freshNamespace("tomb");
    const store = await created(namespace);
    await store.createTag({ tag: "orders", step: 10, startId: 40n });
    await store.takeRange("orders");
    expect((await store.deleteTag("orders"))?.maxId).toBe(50n);
    expect(await redisCommand(redis.port, "EXISTS", store.keys.tag("orders"))).toBe(0);
    expect((await redisHash(redis.port, store.keys.marker))["d:orders"]).toBe("50");
    const later = storeFor(namespace);
    await expect(later.createTag({ tag: "orders", step: 10, startId: 1n })).rejects.toSatisfy(
      (e: unknown) => isLeafError(e, ErrorCodes.ALREADY_EXISTS) && e.details.minStartId === "50",
    );
    expect(await later.inspect()).toMatchObject({ tags: 0, deletedTags: 1 });
  });

  it("lifts a fence all or nothing: every max id, a lost key's recorded one and every tombstone raised by raiseBy", async () => {
    const namespace = freshNamespace("lift");
    const store = await created(namespace);
    await store.createTag({ tag: "live", step: 10, startId: 100n });
    await store.takeRange("live");
    await store.createTag({ tag: "lost", step: 10, startId: 500n });
    await store.createTag({ tag: "gone", step: 10, startId: 900n });
    await store.deleteTag("gone");
    await redisCommand(redis.port, "DEL", store.keys.tag("lost"));
    // The marker names another process, as after a restart.
    await redisCommand(redis.port, "HSET", store.keys.marker, "run_id", "another-process");
    const fenced = (e: unknown) =>
      isLeafError(e, ErrorCodes.CORRUPT_DATA) && e.details.takeover === "restarted";
    await expect(store.takeRange("live")).rejects.toSatisfy(fenced);
    await expect(store.createTag({ tag: "new", step: 1 })).rejects.toSatisfy(fenced);
    const max = (1n << 63n) - 1n;
    for (const raiseBy of [-1n, max + 1n, 5 as unknown as bigint]) {
      await expect(store.liftFence({ raiseBy })).rejects.toSatisfy((e: unknown) =>
        isLeafError(e, ErrorCodes.INVALID_ARGUMENT),
      );
    }
    await expect(store.liftFence({ raiseBy: max - 200n })).rejects.toSatisfy(
      (e: unknown) =>
        isLeafError(e, ErrorCodes.INVALID_ARGUMENT) && e.message.includes("past 2^63 - 1"),
    );
    expect((await store.inspect()).fence?.reason).toBe("restarted");
    expect(await store.liftFence({ raiseBy: 1000n })).toEqual({
      lifted: true,
      reason: "restarted",
      tagsRaised: 2,
    });
    const marker = await redisHash(redis.port, store.keys.marker);
    expect([marker["t:live"], marker["t:lost"], marker["d:gone"]]).toEqual([
      "1110",
      "1500",
      "1900",
    ]);
    expect((await store.takeRange("live")).start).toBe(1110n);
    await expect(store.createTag({ tag: "lost", step: 10, startId: 1499n })).rejects.toSatisfy(
      (e: unknown) => isLeafError(e, ErrorCodes.ALREADY_EXISTS) && e.details.minStartId === "1500",
    );
    await expect(store.createTag({ tag: "gone", step: 10, startId: 1899n })).rejects.toSatisfy(
      (e: unknown) => isLeafError(e, ErrorCodes.ALREADY_EXISTS) && e.details.minStartId === "1900",
    );
    expect((await store.inspect()).lastLifted).toMatchObject({
      reason: "restarted",
      raiseBy: "1000",
    });
  });

  it("refuses a Redis whose eviction policy may drop the keys, unless told to warn", async () => {
    const evicting = await startRedis({
      useEnv: false,
      args: ["--maxmemory", "100mb", "--maxmemory-policy", "allkeys-lru"],
    });
    try {
      const refusing = new RedisSegmentStore({ url: evicting.url, namespace: "n" });
      const error = await refusing.createNamespace().then(
        () => undefined,
        (e: unknown) => e,
      );
      await refusing.close();
      expect(isLeafError(error, ErrorCodes.INVALID_CONFIG)).toBe(true);
      expect((error as Error).message).toContain("allkeys-lru");
      expect((error as Error).message).toContain("maxmemory-policy noeviction");
      expect(await redisCommand(evicting.port, "DBSIZE")).toBe(0);
      const warnings: string[] = [];
      const warning = new RedisSegmentStore({
        url: evicting.url,
        namespace: "n",
        evictionCheck: "warn",
        onWarning: (w) => warnings.push(w.type),
      });
      expect(await warning.createNamespace()).toBe(true);
      await warning.close();
      expect(warnings).toEqual(["eviction-policy"]);
    } finally {
      await evicting.dispose();
    }
  });

  it("leaves a client passed in open, and refuses calls after close with CLOSED", async () => {
    const client = new Redis(redis.url);
    try {
      const store = new RedisSegmentStore({ client, namespace: freshNamespace("borrowed") });
      await store.createNamespace();
      await store.close();
      expect(await client.ping()).toBe("PONG");
      await expect(store.listTags()).rejects.toSatisfy((e: unknown) =>
        isLeafError(e, ErrorCodes.CLOSED),
      );
    } finally {
      client.disconnect();
    }
  });

  it("refuses bad options with INVALID_CONFIG naming the key", () => {
    const config = (options: Partial<RedisSegmentStoreOptions>, key: string) =>
      expect(() => new RedisSegmentStore({ url: "redis://127.0.0.1:1", ...options })).toThrow(
        expect.objectContaining({
          code: ErrorCodes.INVALID_CONFIG,
          details: expect.objectContaining({ key }),
        }),
      );
    config({ namespace: "{x}" }, "namespace");
    config({ keyPrefix: "a{b" }, "keyPrefix");
    config({ waitReplicas: -1 }, "waitReplicas");
    config({ waitReplicas: 1, waitTimeoutMs: 5000, commandTimeoutMs: 1000 }, "commandTimeoutMs");
    config({ evictionCheck: "ignore" as "warn" }, "evictionCheck");
    config({ url: "http://x" }, "url");
    config(
      { url: ["redis://127.0.0.1:1", "redis://127.0.0.1:2"], waitReplicas: 1 },
      "waitReplicas",
    );
  });
});
