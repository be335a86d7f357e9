// Keys changed by hand on a running Redis, under load (same process, same data: the marker's run
// id does not see it): a tag's key deleted, and a tag's max id set back to 1. The marker keeps each
// tag's high-water max id, so a node restarted since (a new store instance, without the floors of
// the old one) is refused rather than handed the ids again, and a provisioning script cannot
// re-create the tag from 1. Every id of every range is counted.
import { ErrorCodes, isLeafError } from "@leaf/core";
import { type RedisHandle, redisCommand, redisHash, startRedis } from "@leaf/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { RedisSegmentStore } from "../src/index";
import { freshNamespace, RangeLoad, repeatedIds } from "./helpers";

const TAGS = ["orders", "users"];
const STEP = 50;

let redis: RedisHandle;

beforeAll(async () => {
  redis = await startRedis({ useEnv: false });
});

afterAll(async () => {
  await redis?.dispose();
});

async function setUp(namespace: string) {
  const open = async () => new RedisSegmentStore({ url: redis.url, namespace });
  const admin = await open();
  await admin.createNamespace();
  for (const tag of TAGS) await admin.createTag({ tag, step: STEP });
  return { open, admin };
}

describe("keys changed by hand under load", () => {
  it("a tag's key deleted: the tag is refused (not unknown), re-created only at or above its recorded max id; 0 ids twice", async () => {
    const namespace = freshNamespace("deleted-key");
    const { open, admin } = await setUp(namespace);
    const load = new RangeLoad({ open, tags: TAGS, nodes: 4, step: STEP }).start();
    await load.waitForRanges(300);
    expect(await redisCommand(redis.port, "DEL", admin.keys.tag("orders"))).toBe(1);
    await load.waitForAnswers(400);
    await load.stop();
    const count = repeatedIds([load]);
    console.log(
      `tag key deleted by hand: ${count.total} ids, ${count.duplicates} twice; answers ${JSON.stringify([...load.outcomes])}`,
    );
    expect(count.duplicates).toBe(0);
    expect(load.outcomes.get("CORRUPT_DATA:max-id-moved-back")).toBeGreaterThan(0);
    const recorded = BigInt((await redisHash(redis.port, admin.keys.marker))["t:orders"]!);
    await expect(admin.createTag({ tag: "orders", step: STEP })).rejects.toSatisfy(
      (e: unknown) =>
        isLeafError(e, ErrorCodes.ALREADY_EXISTS) &&
        e.details.minStartId === recorded.toString() &&
        e.details.lostKey === true,
    );
    await expect(admin.describeTags()).rejects.toSatisfy(
      (e: unknown) => isLeafError(e, ErrorCodes.CORRUPT_DATA) && e.message.includes('"orders"'),
    );
    // The operator's step: the tag again, at its recorded max id.
    await admin.createTag({ tag: "orders", step: STEP, startId: recorded });
    const after = new RangeLoad({ open, tags: TAGS, nodes: 4, step: STEP }).start();
    await after.waitForRanges(100);
    await after.stop();
    expect(repeatedIds([load, after]).duplicates).toBe(0);
    await admin.close();
  });

  it("a tag's max id set back to 1: nodes restarted since are refused by the marker's high-water max id; 0 ids twice", async () => {
    const namespace = freshNamespace("moved-back");
    const { open, admin } = await setUp(namespace);
    const load = new RangeLoad({ open, tags: TAGS, nodes: 4, step: STEP }).start();
    await load.waitForRanges(300);
    expect(await redisCommand(redis.port, "HSET", admin.keys.tag("orders"), "max_id", "1")).toBe(0);
    await load.waitForAnswers(400);
    await load.stop();
    const count = repeatedIds([load]);
    console.log(
      `max id set back by hand: ${count.total} ids, ${count.duplicates} twice; answers ${JSON.stringify([...load.outcomes])}`,
    );
    expect(count.duplicates).toBe(0);
    expect(load.restarts).toBeGreaterThan(4);
    await expect(admin.takeRange("orders")).rejects.toSatisfy(
      (e: unknown) =>
        isLeafError(e, ErrorCodes.CORRUPT_DATA) && e.details.reason === "max-id-moved-back",
    );
    await admin.close();
  });

  it("the marker deleted: every call is refused until createNamespace(), and the tags' keys are then taken up again", async () => {
    const namespace = freshNamespace("marker");
    const { admin } = await setUp(namespace);
    const before = await admin.takeRange("orders");
    expect(await redisCommand(redis.port, "DEL", admin.keys.marker)).toBe(1);
    const store = new RedisSegmentStore({ url: redis.url, namespace });
    await expect(store.takeRange("orders")).rejects.toSatisfy(
      (e: unknown) => isLeafError(e, ErrorCodes.CORRUPT_DATA) && e.details.takeover === "missing",
    );
    expect(await store.createNamespace()).toBe(true);
    const after = await store.takeRange("orders");
    expect(after.start).toBe(before.end);
    expect((await redisHash(redis.port, admin.keys.marker))["t:orders"]).toBe(`${after.end}`);
    await store.close();
    await admin.close();
  });
});
