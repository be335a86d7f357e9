// Redis Cluster: three masters started through the test kit. Every key of a namespace carries the
// hash tag {namespace}, so the scripts that read every tag's key (describeTags, liftFence) stay on
// the marker's slot. The contract suite runs unchanged on a Cluster client made from node URLs.
import { segmentStoreConformance } from "@leaf/conformance/segment-store";
import { ErrorCodes, isLeafError } from "@leaf/core";
import { type RedisHandle, startRedisCluster } from "@leaf/testkit";
import { Cluster } from "ioredis";
import { afterAll, beforeAll, describe, expect, it, test } from "vitest";
import { RedisSegmentStore } from "../src/index";
import { freshNamespace } from "./helpers";

const nodes: RedisHandle[] = [];
const opened: RedisSegmentStore[] = [];

beforeAll(async () => {
  nodes.push(...(await startRedisCluster()));
});

afterAll(async () => {
  for (const store of opened) await store.close().catch(() => {});
  await Promise.all(nodes.map((node) => node.dispose()));
});

function storeFor(namespace: string): RedisSegmentStore {
  const store = new RedisSegmentStore({ url: nodes.map((node) => node.url), namespace });
  opened.push(store);
  return store;
}

segmentStoreConformance(test, {
  name: "redis cluster store",
  async create({ namespace }) {
    const store = storeFor(namespace);
    await store.createNamespace();
    return store;
  },
  concurrentInstances: true,
  giveBack: true,
  editRow: {
    unsupported: "rows edited by hand are covered on one server (test/redis-store.test.ts)",
  },
});

describe("Redis Cluster", () => {
  it("describes and lifts a fence over every tag of a namespace from the marker's slot", async () => {
    const store = storeFor(freshNamespace("cluster"));
    await store.createNamespace();
    for (const tag of ["a", "b", "c"]) await store.createTag({ tag, step: 10 });
    await store.takeRange("b");
    expect((await store.describeTags()).map((r) => [r.tag, r.maxId])).toEqual([
      ["a", 1n],
      ["b", 11n],
      ["c", 1n],
    ]);
    expect(await store.liftFence({ raiseBy: 5n })).toEqual({ lifted: false });
    // The marker names another process, as after a restart: fenced, then lifted.
    const raw = new Cluster(nodes.map((node) => ({ host: "127.0.0.1", port: node.port })));
    try {
      await raw.hset(store.keys.marker, "run_id", "another-process");
    } finally {
      raw.disconnect();
    }
    await expect(store.takeRange("a")).rejects.toSatisfy(
      (e: unknown) => isLeafError(e, ErrorCodes.CORRUPT_DATA) && e.details.takeover === "restarted",
    );
    expect(await store.liftFence({ raiseBy: 5n })).toEqual({
      lifted: true,
      reason: "restarted",
      tagsRaised: 3,
    });
    expect((await store.describeTags()).map((r) => r.maxId)).toEqual([6n, 16n, 6n]);
    expect((await store.takeRange("b")).start).toBe(16n);
    expect(store.redis).toMatch(/^cluster /);
  });
});
