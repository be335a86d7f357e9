// Regression tests from an attack on the Redis segment store: faults the README says are refused or
// fenced, made real with real Redis processes (SAVE, SIGKILL, restart from the RDB, a replica cut
// off) and hand edits, with every id counted. Each broke a promise before its fix:
// - a master restarted from its own older RDB reports second_repl_offset like a promoted replica,
//   so with waitReplicas >= 1 the takeover was accepted (fixed: the marker records Redis TIME of
//   its last write, and only a process started before it counts as promoted);
// - createNamespace over intact tag keys (only the marker lost) recorded none of them: they were
//   not listed, createTag refused them, and liftFence skipped them (fixed: recorded by a SCAN, and
//   liftFence raises every tag key it finds);
// - a marker copy edited to nonsense made the take skip the moved-back check (fixed: refused);
// - a stored step "0x10" was served as 16 (fixed: only canonical decimal steps).
import { ErrorCodes, isLeafError } from "@leaf/core";
import {
  countRepeatedIds,
  type RedisHandle,
  type RedisReplicaSet,
  redisCommand,
  redisReplicaInSync,
  startRedis,
  startRedisReplicaSet,
  TcpProxy,
  waitUntil,
} from "@leaf/testkit";
import { afterEach, describe, expect, it } from "vitest";
import { RedisSegmentStore } from "../src/index";
import { freshNamespace, outcomeOf, RangeLoad, repeatedIds } from "./helpers";

const TAGS = ["orders", "users"];
const STEP = 50;

let redis: RedisHandle | undefined;
let set: RedisReplicaSet | undefined;
let front: TcpProxy | undefined;

afterEach(async () => {
  await front?.close();
  await set?.dispose();
  await redis?.dispose();
  redis = undefined;
  set = undefined;
  front = undefined;
});

describe("attack: waitReplicas and a master restarted from an older snapshot", () => {
  it("a master with a replica, killed and restarted from its RDB (waitReplicas 1): the README says fenced (restarted); ids must not repeat", async () => {
    const namespace = freshNamespace("atk-rdb");
    set = await startRedisReplicaSet({ replicas: 1 });
    await set.waitInSync();
    const url = set.master.url;
    const open = async () =>
      new RedisSegmentStore({ url, namespace, commandTimeoutMs: 2000, waitReplicas: 1 });
    const admin = await open();
    await admin.createNamespace();
    for (const tag of TAGS) await admin.createTag({ tag, step: STEP });
    await admin.close();
    const load = new RangeLoad({ open, tags: TAGS, nodes: 4, step: STEP }).start();
    await load.waitForRanges(100);
    // The snapshot a `save 60 1000` line would make; the writes after it are lost by the crash.
    expect(await redisCommand(set.master.port, "SAVE")).toBe("OK");
    await load.waitForRanges(200);
    await set.master.kill();
    await set.master.start();
    const info = String(await redisCommand(set.master.port, "INFO", "replication"));
    console.log(`restarted master: ${/second_repl_offset:\S+/.exec(info)?.[0]}`);
    load.mark();
    await load.waitForAnswers(300, 60_000);
    await load.stop();
    const count = repeatedIds([load]);
    const probe = await open();
    const state = await probe.inspect();
    await probe.close();
    console.log(
      `master restarted from RDB, waitReplicas 1: ${count.total} ids, ${count.duplicates} twice; ranges after the restart ${load.rangesSinceMark}; answers ${JSON.stringify([...load.outcomes])}; marker fence ${JSON.stringify(state.fence)} accepted ${JSON.stringify(state.lastAccepted)}`,
    );
    expect(count.duplicates).toBe(0);
    expect(load.rangesSinceMark).toBe(0);
    expect(state.fence?.reason).toBe("restarted");
    expect(state.lastAccepted).toBeUndefined();
    expect(load.outcomes.get("CORRUPT_DATA:stale-primary:restarted")).toBeGreaterThan(0);
  }, 120_000);
});

describe("attack: liftFence after the marker was re-created (README: createNamespace is enough)", () => {
  it("only the marker deleted by hand, createNamespace, then a restart from an older snapshot and liftFence with a generous raiseBy: ids must not repeat", async () => {
    const namespace = freshNamespace("atk-lift");
    redis = await startRedis({ useEnv: false });
    const store = () => new RedisSegmentStore({ url: redis!.url, namespace });
    const admin = store();
    await admin.createNamespace();
    for (const tag of TAGS) await admin.createTag({ tag, step: STEP });
    const ids = new Map<string, bigint[]>(TAGS.map((t) => [t, []]));
    const take = async (s: RedisSegmentStore, tag: string, n: number) => {
      for (let i = 0; i < n; i++) {
        const r = await s.takeRange(tag);
        for (let id = r.start; id < r.end; id++) ids.get(tag)!.push(id);
      }
    };
    await take(admin, "users", 3);
    await take(admin, "orders", 3);
    // The marker alone deleted by hand; the README's step for it: createNamespace().
    expect(await redisCommand(redis.port, "DEL", admin.keys.marker)).toBe(1);
    await admin.close();
    const operator = store();
    expect(await operator.createNamespace()).toBe(true);
    await operator.close();
    const a = store();
    await take(a, "orders", 1); // orders is taken up again; users is idle for now
    expect(await redisCommand(redis.port, "SAVE")).toBe("OK");
    await take(a, "users", 4); // after the snapshot: lost by the restart
    await a.close();
    await redis.kill();
    await redis.start();
    const fenced = store();
    // The first script after the restart sees the marker name the old process and fences.
    await expect(fenced.takeRange("orders")).rejects.toSatisfy(
      (e: unknown) => isLeafError(e, ErrorCodes.CORRUPT_DATA) && e.details.takeover === "restarted",
    );
    expect((await fenced.inspect()).fence?.reason).toBe("restarted");
    const lifted = await fenced.liftFence({ raiseBy: 1_000_000n });
    console.log(`lift: ${JSON.stringify(lifted)}`);
    await fenced.close();
    const b = store();
    let refused = "";
    try {
      await take(b, "users", 4);
      await take(b, "orders", 2);
    } catch (error) {
      refused = outcomeOf(error);
    }
    await b.close();
    let duplicates = 0;
    for (const tag of TAGS) {
      const c = countRepeatedIds([BigInt64Array.from(ids.get(tag)!)]);
      console.log(
        `tag ${tag}: ${c.total} ids, ${c.duplicates} twice, e.g. ${c.examples.join(", ")}`,
      );
      duplicates += c.duplicates;
    }
    console.log(`refused: ${refused}`);
    expect(duplicates).toBe(0);
    expect(refused).toBe("");
    expect(lifted).toEqual({ lifted: true, reason: "restarted", tagsRaised: 2 });
  }, 60_000);

  it("a tag key the marker does not record (its copy deleted by hand) is raised by liftFence too", async () => {
    const namespace = freshNamespace("atk-unrecorded");
    redis = await startRedis({ useEnv: false });
    const admin = new RedisSegmentStore({ url: redis.url, namespace });
    await admin.createNamespace();
    for (const tag of TAGS) await admin.createTag({ tag, step: STEP });
    const ids: bigint[] = [];
    for (let i = 0; i < 3; i++) {
      const r = await admin.takeRange("users");
      for (let id = r.start; id < r.end; id++) ids.push(id);
    }
    await admin.close();
    // A marker without the tag's copy (deleted by hand).
    expect(await redisCommand(redis.port, "HDEL", admin.keys.marker, "t:users")).toBe(1);
    expect(await redisCommand(redis.port, "SAVE")).toBe("OK");
    const a = new RedisSegmentStore({ url: redis.url, namespace });
    for (let i = 0; i < 4; i++) {
      const r = await a.takeRange("users"); // after the snapshot: lost by the restart
      for (let id = r.start; id < r.end; id++) ids.push(id);
    }
    await a.close();
    await redis.kill();
    await redis.start();
    const operator = new RedisSegmentStore({ url: redis.url, namespace });
    await expect(operator.takeRange("orders")).rejects.toSatisfy(
      (e: unknown) => isLeafError(e, ErrorCodes.CORRUPT_DATA) && e.details.takeover === "restarted",
    );
    const lifted = await operator.liftFence({ raiseBy: 1_000_000n });
    await operator.close();
    const b = new RedisSegmentStore({ url: redis.url, namespace });
    for (let i = 0; i < 4; i++) {
      const r = await b.takeRange("users");
      for (let id = r.start; id < r.end; id++) ids.push(id);
    }
    expect(await b.listTags()).toEqual(TAGS);
    await b.close();
    const c = countRepeatedIds([BigInt64Array.from(ids)]);
    console.log(
      `unrecorded tag key, lift ${JSON.stringify(lifted)}: ${c.total} ids, ${c.duplicates} twice`,
    );
    expect(c.duplicates).toBe(0);
    expect(lifted).toEqual({ lifted: true, reason: "restarted", tagsRaised: 2 });
  }, 60_000);
});

describe("attack: waitReplicas and a replica that acknowledged, then restarted from its own older RDB", () => {
  it("replica SAVEs, acknowledges more ranges, restarts from its RDB cut off from the master, is promoted (waitReplicas 1): ids must not repeat", async () => {
    const namespace = freshNamespace("atk-replica-rdb");
    set = await startRedisReplicaSet({ replicas: 1 });
    await set.waitInSync();
    front = await TcpProxy.start({ targetPort: set.master.port });
    const url = `redis://127.0.0.1:${front.port}`;
    const open = async () =>
      new RedisSegmentStore({
        url,
        namespace,
        commandTimeoutMs: 1000,
        waitReplicas: 1,
        waitTimeoutMs: 300,
      });
    const admin = await open();
    await admin.createNamespace();
    for (const tag of TAGS) await admin.createTag({ tag, step: STEP });
    await admin.close();
    const load = new RangeLoad({ open, tags: TAGS, nodes: 4, step: STEP }).start();
    await load.waitForRanges(100);
    const replica = set.replicas[0]!;
    expect(await redisCommand(replica.port, "SAVE")).toBe("OK");
    await load.waitForRanges(200); // every one acknowledged by the replica (WAIT 1)
    set.links[0]!.cutOff();
    await replica.kill();
    await replica.start(); // from its RDB, older than what it acknowledged
    await load.waitForAnswers(40);
    await set.master.kill();
    expect(await redisCommand(replica.port, "REPLICAOF", "NO", "ONE")).toBe("OK");
    front.retarget(replica.port);
    const promotedInfo = String(await redisCommand(replica.port, "INFO", "replication"));
    console.log(`promoted replica: ${/second_repl_offset:\S+/.exec(promotedInfo)?.[0]}`);
    await set.master.start();
    await redisCommand(set.master.port, "REPLICAOF", "127.0.0.1", String(replica.port));
    await waitUntil("the old master to follow the promoted replica", () =>
      redisReplicaInSync(set!.master.port, replica.port),
    );
    load.mark();
    await load.waitForAnswers(300, 60_000);
    await load.stop();
    const count = repeatedIds([load]);
    const probe = await open();
    const state = await probe.inspect();
    await probe.close();
    console.log(
      `marker on the promoted replica: ${JSON.stringify(await redisCommand(replica.port, "HMGET", probe.keys.marker, "run_id", "fenced_run_id", "fence_reason", "accepted_reason", "wait_replicas"))}, its run id ${/run_id:\S+/.exec(String(await redisCommand(replica.port, "INFO", "server")))?.[0]}`,
    );
    console.log(
      `replica restarted from its RDB then promoted, waitReplicas 1: ${count.total} ids, ${count.duplicates} twice; ranges after ${load.rangesSinceMark}; answers ${JSON.stringify([...load.outcomes])}; fence ${JSON.stringify(state.fence)} accepted ${JSON.stringify(state.lastAccepted)}`,
    );
    expect(count.duplicates).toBe(0);
    expect(load.rangesSinceMark).toBe(0);
    expect(state.fence?.reason).toBe("restarted");
  }, 120_000);
});

describe("attack: hand edits", () => {
  it("the marker's copy of a max id edited to nonsense, then the max id set back: the README says a max id set back is refused", async () => {
    const namespace = freshNamespace("atk-edit");
    redis = await startRedis({ useEnv: false });
    const store = new RedisSegmentStore({ url: redis.url, namespace });
    await store.createNamespace();
    await store.createTag({ tag: "orders", step: STEP });
    const ids: bigint[] = [];
    for (let i = 0; i < 4; i++) {
      const r = await store.takeRange("orders");
      for (let id = r.start; id < r.end; id++) ids.push(id);
    }
    await store.close();
    await redisCommand(redis.port, "HSET", store.keys.marker, "t:orders", "garbage");
    await redisCommand(redis.port, "HSET", store.keys.tag("orders"), "max_id", "1");
    const other = new RedisSegmentStore({ url: redis.url, namespace });
    let outcome = "range";
    try {
      for (let i = 0; i < 4; i++) {
        const r = await other.takeRange("orders");
        for (let id = r.start; id < r.end; id++) ids.push(id);
      }
    } catch (error) {
      outcome = outcomeOf(error);
    }
    let refusal: unknown;
    await other.deleteTag("orders").catch((error: unknown) => {
      refusal = error;
    });
    await other.close();
    const c = countRepeatedIds([BigInt64Array.from(ids)]);
    console.log(
      `marker copy garbage + max id set back: ${c.total} ids, ${c.duplicates} twice; ${outcome}`,
    );
    expect(c.duplicates).toBe(0);
    expect(outcome).toBe("CORRUPT_DATA:bad-max-id");
    // deleteTag would record the set-back max id as the tombstone: refused as well.
    expect(isLeafError(refusal, ErrorCodes.CORRUPT_DATA)).toBe(true);
    expect((refusal as Error).message).toContain('"garbage"');
    expect((refusal as Error).message).toContain('"t:orders"');
  });

  it("a deleted tag's tombstone edited to nonsense: createTag below the old ids is refused", async () => {
    const namespace = freshNamespace("atk-tomb");
    redis = await startRedis({ useEnv: false });
    const store = new RedisSegmentStore({ url: redis.url, namespace });
    await store.createNamespace();
    await store.createTag({ tag: "orders", step: STEP });
    await store.takeRange("orders");
    await store.deleteTag("orders");
    await redisCommand(redis.port, "HSET", store.keys.marker, "d:orders", "garbage");
    await expect(store.createTag({ tag: "orders", step: STEP })).rejects.toSatisfy(
      (e: unknown) =>
        isLeafError(e, ErrorCodes.CORRUPT_DATA) &&
        e.details.reason === "bad-max-id" &&
        e.details.markerField === "d:orders",
    );
    await store.close();
  });

  it("stored step and max id edited to nonsense: refused with an error naming the value", async () => {
    const namespace = freshNamespace("atk-nonsense");
    redis = await startRedis({ useEnv: false });
    const store = new RedisSegmentStore({ url: redis.url, namespace });
    await store.createNamespace();
    const seen: string[] = [];
    let n = 0;
    for (const [field, value] of [
      ["step", "0"],
      ["step", "-5"],
      ["step", "2147483648"],
      ["step", "1.5"],
      ["step", "nan"],
      ["step", "inf"],
      ["step", "0x10"],
      ["step", " 7"],
      ["step", "1e2"],
      ["step", "7 "],
      ["step", "+7"],
      ["step", "07"],
      ["step", "7.0"],
      ["step", "99999999999"],
      ["step", ""],
      ["max_id", "-1"],
      ["max_id", "9223372036854775808"],
      ["max_id", "00"],
      ["max_id", "1.0"],
      ["max_id", ""],
    ] as const) {
      // A fresh tag for each value: no floor of an earlier range, no marker copy above it.
      const tag = `t${n++}`;
      await store.createTag({ tag, step: STEP, startId: 100n });
      await redisCommand(redis.port, "HSET", store.keys.tag(tag), field, value);
      const expected = field === "step" ? "CORRUPT_DATA:bad-step" : "CORRUPT_DATA:bad-max-id";
      let outcome = "";
      let message = "";
      try {
        const r = await store.takeRange(tag);
        outcome = `range [${r.start}, ${r.end}) step ${r.step}`;
      } catch (error) {
        outcome = outcomeOf(error);
        message = (error as Error).message;
      }
      seen.push(`${field}=${JSON.stringify(value)}: ${outcome} ${message.slice(0, 120)}`);
      expect(outcome, `${field}=${JSON.stringify(value)}`).toBe(expected);
      expect(message).toContain(field === "step" ? `step is ${value}` : "max id");
      await store.deleteTag(tag).catch(() => undefined);
      await redisCommand(redis.port, "DEL", store.keys.tag(tag));
      await redisCommand(redis.port, "HDEL", store.keys.marker, `t:${tag}`, `d:${tag}`);
    }
    await store.close();
    console.log(seen.join("\n"));
  });
});

describe("attack: bad options", () => {
  it("each bad option gets an error naming the value", () => {
    const seen: string[] = [];
    for (const options of [
      { url: "redis://127.0.0.1:1", namespace: "" },
      { url: "redis://127.0.0.1:1", namespace: "a{b}" },
      { url: "redis://127.0.0.1:1", keyPrefix: "x{" },
      { url: "redis://127.0.0.1:1", waitReplicas: -1 },
      { url: "redis://127.0.0.1:1", waitReplicas: 1.5 },
      { url: "redis://127.0.0.1:1", waitTimeoutMs: 0 },
      { url: "redis://127.0.0.1:1", waitReplicas: 1, waitTimeoutMs: 5000, commandTimeoutMs: 3000 },
      { url: "redis://127.0.0.1:1", evictionCheck: "ignore" },
      { url: "http://127.0.0.1:1" },
      { url: "redis://127.0.0.1:1", client: {} },
      {},
    ]) {
      try {
        new RedisSegmentStore(options as never);
        seen.push(`${JSON.stringify(options)}: accepted`);
      } catch (error) {
        seen.push(`${JSON.stringify(options)}: ${(error as Error).message}`);
      }
    }
    console.log(seen.join("\n"));
    expect(seen.filter((s) => s.endsWith(": accepted"))).toEqual([]);
  });
});

describe("attack: describeTags after the marker was re-created", () => {
  it("tags whose keys are intact are listed after createNamespace (README: taken up again)", async () => {
    const namespace = freshNamespace("atk-list");
    redis = await startRedis({ useEnv: false });
    const store = new RedisSegmentStore({ url: redis.url, namespace });
    await store.createNamespace();
    for (const tag of TAGS) await store.createTag({ tag, step: STEP });
    await redisCommand(redis.port, "DEL", store.keys.marker);
    expect(await store.createNamespace()).toBe(true);
    const listed = await store.listTags();
    let created = "";
    try {
      await store.createTag({ tag: "users", step: STEP });
      created = "created";
    } catch (error) {
      created = outcomeOf(error);
    }
    const described = await store.describeTags();
    const range = await store.takeRange("users");
    await store.close();
    console.log(
      `listTags after marker re-created: ${JSON.stringify(listed)}; createTag users: ${created}`,
    );
    expect(listed).toEqual(TAGS);
    expect(created).toBe("ALREADY_EXISTS:exists");
    expect(described.map((r) => [r.tag, r.maxId])).toEqual([
      ["orders", 1n],
      ["users", 1n],
    ]);
    expect(range.start).toBe(1n);
  });
});
