// The link to Redis cut during a call, with a real TCP proxy between the store and Redis.
// A give-back whose answer is lost: Redis ran it, a second node took the ids given back and handed
// them out, and then the first node's ioredis client (options as the caller made them: commands
// sent again after a reconnect, ioredis's default) sends the give-back again. The version the
// give-back compares makes that copy change nothing. A client the store makes itself never sends a
// command twice. Ranges taken by nodes whose link is cut again and again are all disjoint.
import { ErrorCodes, isLeafError } from "@leaf/core";
import {
  countDuplicates,
  type RedisHandle,
  redisCommand,
  redisHash,
  startRedis,
  TcpProxy,
  waitUntil,
} from "@leaf/testkit";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { RedisSegmentStore, type RedisSegmentStoreOptions } from "../src/index";
import { freshNamespace, RangeLoad, repeatedIds, sleep } from "./helpers";

let redis: RedisHandle;
const closers: (() => Promise<unknown>)[] = [];

beforeAll(async () => {
  redis = await startRedis({ useEnv: false });
});

afterAll(async () => {
  for (const close of closers.reverse()) await close().catch(() => {});
  await redis?.dispose();
});

/** Script calls Redis has run so far (EVALSHA and EVAL), from INFO commandstats. */
async function scriptCalls(): Promise<number> {
  const info = String(await redisCommand(redis.port, "INFO", "commandstats"));
  let calls = 0;
  for (const match of info.matchAll(/cmdstat_(?:evalsha|eval):calls=(\d+)/g)) {
    calls += Number(match[1]);
  }
  return calls;
}

function ids(range: { start: bigint; end: bigint }): bigint[] {
  const out: bigint[] = [];
  for (let id = range.start; id < range.end; id++) out.push(id);
  return out;
}

async function store(options: RedisSegmentStoreOptions): Promise<RedisSegmentStore> {
  const opened = new RedisSegmentStore(options);
  closers.push(() => opened.close());
  return opened;
}

/**
 * Node A (through `proxy`) takes [0, 10) and gives back [5, 10) while Redis holds writes; the link
 * is cut before the answer comes back. Once Redis ran it, node B takes [5, 10) and hands it out.
 * Then the link heals. Answers what A, B and a later node C handed out, and A's store.
 */
async function giveBackAnswerLost(namespace: string, a: RedisSegmentStore, proxy: TcpProxy) {
  const b = await store({ url: redis.url, namespace });
  await b.createNamespace();
  await b.createTag({ tag: "t", step: 10, startId: 0n });
  const first = await a.takeRange("t");
  expect([first.start, first.end]).toEqual([0n, 10n]);
  const handedOut = [ids({ start: 0n, end: 5n })];
  // Redis knows the give-back's script (a give-back of B's), so that A's goes out by EVALSHA alone.
  await b.createTag({ tag: "warm-up", step: 10 });
  const warmUp = await b.takeRange("warm-up");
  expect(await b.giveBack("warm-up", warmUp.start, warmUp.end)).toBe(true);
  // Reads go on (the give-back's probe), the give-back's script waits in Redis.
  expect(await redisCommand(redis.port, "CLIENT", "PAUSE", "1500", "WRITE")).toBe("OK");
  const giving = a.giveBack("t", 5n, 10n);
  await sleep(300);
  proxy.cutOff();
  await expect(giving).rejects.toSatisfy((e: unknown) => isLeafError(e, ErrorCodes.UNAVAILABLE));
  await waitUntil("Redis to run the give-back", async () => {
    return (await redisHash(redis.port, a.keys.tag("t"))).max_id === "5";
  });
  const fromB = await b.takeRange("t", 5);
  expect([fromB.start, fromB.end]).toEqual([5n, 10n]);
  handedOut.push(ids(fromB));
  const calls = await scriptCalls();
  proxy.heal();
  return { handedOut, calls };
}

describe("the link to Redis cut during a call", () => {
  it("a give-back whose answer was lost and that the caller's client sends again after the ids were taken anew changes nothing (its version moved on); 0 ids twice", async () => {
    const namespace = freshNamespace("resent");
    const proxy = await TcpProxy.start({ targetPort: redis.port });
    closers.push(() => proxy.close());
    // The caller's client, with ioredis's defaults: unanswered commands are sent again.
    const client = new Redis(`redis://127.0.0.1:${proxy.port}`);
    client.on("error", () => {});
    closers.push(async () => client.disconnect());
    const a = await store({ client, namespace, commandTimeoutMs: 500 });
    const { handedOut, calls } = await giveBackAnswerLost(namespace, a, proxy);
    await waitUntil(
      "A's client to send the give-back again",
      async () => (await scriptCalls()) > calls,
    );
    const c = await store({ url: redis.url, namespace });
    const fromC = await c.takeRange("t", 5);
    handedOut.push(ids(fromC));
    const count = countDuplicates(handedOut);
    console.log(
      `give-back sent again after its answer was lost: ${count.total} ids, ${count.duplicates} twice; C got [${fromC.start}, ${fromC.end})`,
    );
    expect(count.duplicates).toBe(0);
    expect(fromC.start).toBe(10n);
  });

  it("a client the store makes never sends the give-back again", async () => {
    const namespace = freshNamespace("owned");
    const proxy = await TcpProxy.start({ targetPort: redis.port });
    closers.push(() => proxy.close());
    const a = await store({
      url: `redis://127.0.0.1:${proxy.port}`,
      namespace,
      commandTimeoutMs: 500,
    });
    const { calls } = await giveBackAnswerLost(namespace, a, proxy);
    // Once A's client answers again (its give-back's probe, a plain HMGET: the give-back no longer
    // applies), anything it would send again has gone out: no script did.
    await waitUntil("A's client to answer again", () =>
      a.giveBack("t", 5n, 10n).then(
        (given) => !given,
        () => false,
      ),
    );
    expect(await scriptCalls()).toBe(calls);
    expect((await a.takeRange("t")).start).toBe(10n);
  });

  it("ranges taken by nodes whose link is cut and healed again and again are disjoint; 0 ids twice", async () => {
    const namespace = freshNamespace("cuts");
    const proxy = await TcpProxy.start({ targetPort: redis.port });
    closers.push(() => proxy.close());
    const admin = await store({ url: redis.url, namespace });
    await admin.createNamespace();
    for (const tag of ["orders", "users"]) await admin.createTag({ tag, step: 50 });
    const load = new RangeLoad({
      open: async () =>
        new RedisSegmentStore({
          url: `redis://127.0.0.1:${proxy.port}`,
          namespace,
          commandTimeoutMs: 300,
        }),
      tags: ["orders", "users"],
      nodes: 4,
      step: 50,
    }).start();
    for (let i = 0; i < 6; i++) {
      await load.waitForRanges(50);
      proxy.cutOff();
      await load.waitForAnswers(4);
      proxy.heal();
    }
    await load.waitForRanges(50);
    await load.stop();
    const count = repeatedIds([load]);
    console.log(
      `ranges under 6 link cuts: ${count.total} ids, ${count.duplicates} twice; answers ${JSON.stringify([...load.outcomes])}`,
    );
    expect(count.duplicates).toBe(0);
    expect(load.outcomes.size).toBeGreaterThan(0);
  });
});
