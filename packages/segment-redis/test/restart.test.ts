// A Redis restarted under load, with real processes: once without persistence (it comes back
// empty: every tag and tombstone gone) and once from an older snapshot (it comes back with the
// tags' max ids of the snapshot, behind the ranges handed out after it). Four nodes take ranges of
// two tags throughout; a node that is refused restarts (a new store instance), and a provisioning
// script re-creates any tag the store calls unknown. Every id of every range is counted. After the
// fault, the operator's documented step (create the namespace and the tags above the highest id,
// or lift the fence with a raiseBy) lets fresh nodes take ranges again, and those are counted too.
import { ErrorCodes, isLeafError } from "@leaf/core";
import { type RedisHandle, redisCommand, startRedis } from "@leaf/testkit";
import { afterEach, describe, expect, it } from "vitest";
import { RedisSegmentStore } from "../src/index";
import { freshNamespace, RangeLoad, repeatedIds } from "./helpers";

const TAGS = ["orders", "users"];
const STEP = 50;

let redis: RedisHandle | undefined;

afterEach(async () => {
  await redis?.dispose();
  redis = undefined;
});

function opener(url: string, namespace: string) {
  return async () => new RedisSegmentStore({ url, namespace, commandTimeoutMs: 1000 });
}

async function setUp(namespace: string): Promise<RedisHandle> {
  redis = await startRedis({ useEnv: false });
  const admin = new RedisSegmentStore({ url: redis.url, namespace });
  await admin.createNamespace();
  for (const tag of TAGS) await admin.createTag({ tag, step: STEP });
  await admin.close();
  return redis;
}

function load(url: string, namespace: string): RangeLoad {
  return new RangeLoad({ open: opener(url, namespace), tags: TAGS, nodes: 4, step: STEP }).start();
}

describe("a Redis restarted under load", () => {
  it("without persistence (back empty): the marker is gone, so nothing is served and no tag is re-created until the operator creates the namespace and the tags above every id handed out; 0 ids twice", async () => {
    const namespace = freshNamespace("empty");
    const server = await setUp(namespace);
    const before = load(server.url, namespace);
    await before.waitForRanges(300);
    await server.kill();
    await server.start();
    expect(await redisCommand(server.port, "DBSIZE")).toBe(0);
    before.mark();
    await before.waitForAnswers(200);
    await before.stop();
    const afterFault = before.rangesSinceMark;
    const refusals = Object.fromEntries(before.outcomes);
    const during = repeatedIds([before]);
    console.log(
      `restart without persistence: ${during.total} ids, ${during.duplicates} twice; ranges after the restart ${afterFault}; answers ${JSON.stringify(refusals)}`,
    );
    expect(during.duplicates).toBe(0);
    expect(afterFault).toBe(0);
    // The operator's step: the namespace and its tags again, above every id handed out.
    const { highest } = during;
    const admin = new RedisSegmentStore({ url: server.url, namespace });
    expect(await admin.createNamespace()).toBe(true);
    for (const tag of TAGS) await admin.createTag({ tag, step: STEP, startId: highest + 1n });
    await admin.close();
    const after = load(server.url, namespace);
    await after.waitForRanges(100);
    await after.stop();
    const count = repeatedIds([before, after]);
    console.log(
      `restart without persistence, then recovered: ${count.total} ids, ${count.duplicates} twice`,
    );
    expect(count.duplicates).toBe(0);
    expect(refusals["CORRUPT_DATA:stale-primary:missing"]).toBeGreaterThan(0);
  });

  it("from an older snapshot: the marker names the old process, so the namespace is fenced until the operator lifts it with a raiseBy; 0 ids twice", async () => {
    const namespace = freshNamespace("snapshot");
    const server = await setUp(namespace);
    const before = load(server.url, namespace);
    await before.waitForRanges(200);
    expect(await redisCommand(server.port, "SAVE")).toBe("OK");
    await before.waitForRanges(300);
    await server.kill();
    await server.start();
    expect(Number(await redisCommand(server.port, "DBSIZE"))).toBeGreaterThan(0);
    before.mark();
    await before.waitForAnswers(200);
    await before.stop();
    const afterFault = before.rangesSinceMark;
    const refusals = Object.fromEntries(before.outcomes);
    const during = repeatedIds([before]);
    console.log(
      `restart from an older snapshot: ${during.total} ids, ${during.duplicates} twice; ranges after the restart ${afterFault}; answers ${JSON.stringify(refusals)}`,
    );
    expect(during.duplicates).toBe(0);
    expect(afterFault).toBe(0);
    const admin = new RedisSegmentStore({ url: server.url, namespace });
    const fenced = await admin.inspect();
    expect(fenced.fence?.reason).toBe("restarted");
    await expect(admin.takeRange("orders")).rejects.toSatisfy(
      (e: unknown) =>
        isLeafError(e, ErrorCodes.CORRUPT_DATA) &&
        e.details.takeover === "restarted" &&
        e.message.includes("liftFence"),
    );
    // The operator's step: every max id raised past what the lost writes could have handed out.
    expect(await admin.liftFence({ raiseBy: 1_000_000n })).toEqual({
      lifted: true,
      reason: "restarted",
      tagsRaised: 2,
    });
    expect(await admin.liftFence({ raiseBy: 0n })).toEqual({ lifted: false });
    await admin.close();
    const after = load(server.url, namespace);
    await after.waitForRanges(100);
    await after.stop();
    const count = repeatedIds([before, after]);
    console.log(
      `restart from an older snapshot, then recovered: ${count.total} ids, ${count.duplicates} twice`,
    );
    expect(count.duplicates).toBe(0);
    expect(refusals["CORRUPT_DATA:stale-primary:restarted"]).toBeGreaterThan(0);
  });
});
