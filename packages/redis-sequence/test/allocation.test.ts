// Allocation against a real Redis: ids parse back, ranges are cached and refilled one round trip
// at a time, range sizes follow demand, and a used-up second locks and moves on.
import { defineLayout, ErrorCodes, ManualClock } from "@leaf/core";
import { started } from "@leaf/testkit";
import { describe, expect, it } from "vitest";
import { RedisSequence } from "../src/index";
import { duplicates, passFenceManually, redisFixture, sleep } from "./helpers";

const fx = redisFixture("alloc", { maxClockSkewMs: 500, fenceMarginMs: 0 });
const sequence = fx.sequence;

/** Script calls Redis has run so far (EVALSHA and EVAL), from INFO commandstats. */
async function scriptCalls(): Promise<number> {
  const info = await fx.raw.info("commandstats");
  let total = 0;
  for (const match of info.matchAll(/cmdstat_(?:evalsha|eval):calls=(\d+)/g)) {
    total += Number(match[1]);
  }
  return total;
}

/** A layout with 16 sequences per second, so a second is used up in a test. */
const tinyLayout = defineLayout({
  name: "tiny",
  timestampBits: 32,
  workerBits: 12,
  sequenceBits: 4,
  unitMillis: 1000,
  epoch: Date.UTC(2020, 0, 1),
});

describe("allocation", () => {
  it("hands out ids that parse back to their second, shard and sequence", async () => {
    const seq = await sequence({ timeZone: "+08:00", prefix: "ORD" });
    const before = Math.floor(Date.now() / 1000);
    const ids: bigint[] = [];
    for (let i = 0; i < 2000; i++) ids.push(await seq.nextId(i % 4096));
    const after = Math.floor(Date.now() / 1000);
    expect(duplicates(ids)).toEqual([]);
    ids.forEach((id, i) => {
      const parsed = seq.parse(id);
      expect(parsed.shard).toBe(i % 4096);
      expect(parsed.second).toBeGreaterThanOrEqual(before);
      expect(parsed.second).toBeLessThanOrEqual(after + 1);
      const text = seq.format(id);
      expect(text.startsWith("ORD")).toBe(true);
      expect(seq.parse(text)).toMatchObject({
        id,
        second: parsed.second,
        shard: parsed.shard,
        sequence: parsed.sequence,
      });
    });
    const text = await seq.nextString(9, "X");
    expect(text).toMatch(/^X\d{14}\d{6}0009$/);
    expect(seq.parse(text).shard).toBe(9);
  });

  it("shares one counter per second among all shards and lets it expire after 600 s", async () => {
    const seq = await sequence({ batchSize: 100, minBatchSize: 100 });
    const clock = new ManualClock(Date.now());
    const frozen = await started(
      new RedisSequence({
        url: fx.redis.url,
        namespace: seq.keys.namespace,
        clock,
        maxClockSkewMs: 3000,
        fenceMarginMs: 0,
        batchSize: 100,
        minBatchSize: 100,
      }),
    );
    fx.open.push(frozen);
    const second = await passFenceManually(frozen, clock, 3000);
    const ids: bigint[] = [];
    for (let shard = 0; shard < 150; shard++) ids.push(await frozen.nextId(shard));
    const sequences = ids.map((id) => frozen.parse(id));
    expect(new Set(sequences.map((p) => p.second))).toEqual(new Set([second]));
    // Shards share the counter: 150 ids of 150 shards use 150 distinct sequences.
    expect(new Set(sequences.map((p) => p.sequence)).size).toBe(150);
    const key = frozen.keys.sequence(second);
    expect(Number(await fx.raw.get(key))).toBeGreaterThanOrEqual(150);
    const ttl = await fx.raw.ttl(key);
    expect(ttl).toBeGreaterThan(590);
    expect(ttl).toBeLessThanOrEqual(600);
    expect(await fx.raw.ttl(frozen.keys.marker())).toBe(-1);
  });

  it("keeps one counter per shard with sequenceScope shard", async () => {
    const seq = await sequence({ sequenceScope: "shard", batchSize: 50, minBatchSize: 50 });
    const a = await seq.nextIds(1, 10);
    const b = await seq.nextIds(2, 10);
    const pa = a.map((id) => seq.parse(id));
    const pb = b.map((id) => seq.parse(id));
    if (pa[0]!.second === pb[0]!.second) {
      // Each shard starts its own counter of that second at 0.
      expect(pa[0]!.sequence).toBe(0);
      expect(pb[0]!.sequence).toBe(0);
    }
    expect(await fx.raw.exists(seq.keys.sequence(pa[0]!.second, 1))).toBe(1);
    expect(await fx.raw.exists(seq.keys.sequence(pa[0]!.second))).toBe(0);
    expect(
      seq
        .state()
        .slots.map((s) => s.shard)
        .sort(),
    ).toEqual([1, 2]);
  });

  it("sends one round trip per counter however many callers wait at once", async () => {
    const first = await sequence({ batchSize: 1000, minBatchSize: 1000 });
    await first.nextId(0); // the namespace's fence has passed
    const seq = await started(
      new RedisSequence({
        url: fx.redis.url,
        namespace: first.keys.namespace,
        batchSize: 1000,
        minBatchSize: 1000,
        maxClockSkewMs: 500,
        fenceMarginMs: 0,
      }),
    );
    fx.open.push(seq);
    const before = await scriptCalls();
    const ids = await Promise.all(Array.from({ length: 600 }, (_, i) => seq.nextId(i % 64)));
    const calls = (await scriptCalls()) - before;
    expect(duplicates(ids)).toEqual([]);
    // One allocation serves all 600 callers; a second one only if the second ticked meanwhile
    // (plus at most one prefetch when the first range runs low, which 600 of 1000 does not).
    const seconds = new Set(ids.map((id) => seq.parse(id).second)).size;
    expect(calls).toBeLessThanOrEqual(seconds);
    expect(seq.state().stats.ranges).toBe(calls);
  });

  it("never has two refills of a counter in flight: Redis grants at most one range ahead", async () => {
    const clock = new ManualClock(Date.now());
    const seq = await sequence({ clock, batchSize: 10, minBatchSize: 10, maxClockSkewMs: 3000 });
    const second = await passFenceManually(seq, clock, 3000);
    const ids = await Promise.all(Array.from({ length: 500 }, () => seq.nextId(3)));
    expect(duplicates(ids)).toEqual([]);
    while (seq.state().slots[0]!.refillInFlight) await sleep(5); // a prefetch may still travel
    const granted = Number(await fx.raw.get(seq.keys.sequence(second)));
    // 500 ids taken 10 at a time: 50 ranges, plus at most one prefetched range in flight.
    expect(granted).toBeGreaterThanOrEqual(500);
    expect(granted).toBeLessThanOrEqual(510);
    expect(seq.state().stats.ranges).toBe(granted / 10);
  });

  it("grows the range per round trip with demand, up to batchSize", async () => {
    const seq = await sequence({ batchSize: 4000, minBatchSize: 16 });
    await seq.nextIds(5, 20_000);
    const slot = seq.state().slots[0]!;
    // 20,000 ids in at most a few seconds: the range doubled from 16 to the 4000 cap.
    expect(slot.batchSize).toBe(4000);
    expect(seq.state().stats.ranges).toBeLessThan(40);
  });

  it("shrinks the range when a second ends with most of it unused", async () => {
    const seq = await sequence({ batchSize: 1000, minBatchSize: 16 });
    await seq.nextIds(0, 5000);
    const grown = seq.state().slots[0]!.batchSize;
    expect(grown).toBe(1000);
    // One id per second for a few seconds: each new second finds most of its last range unused.
    let lastSecond = seq.parse(await seq.nextId(0)).second;
    const sizes: number[] = [];
    while (sizes.length < 3) {
      await sleep(250);
      const second = seq.parse(await seq.nextId(0)).second;
      if (second !== lastSecond) {
        sizes.push(seq.state().slots[0]!.batchSize);
        lastSecond = second;
      }
    }
    expect(sizes[0]!).toBeLessThan(grown);
    expect(sizes[2]!).toBeLessThan(sizes[0]!);
  });

  it("returns consecutive ids from nextIds and counts them in the state", async () => {
    const seq = await sequence({ batchSize: 500, minBatchSize: 500 });
    const ids = await seq.nextIds(77, 300);
    expect(ids).toHaveLength(300);
    expect(duplicates(ids)).toEqual([]);
    for (const id of ids) expect(seq.parse(id).shard).toBe(77);
    const sameRange = ids.slice(1).filter((id, i) => id === ids[i]! + 1n).length;
    expect(sameRange).toBeGreaterThan(250);
    expect(seq.state().stats.ids).toBe(300);
  });

  it("serves tryNextIdSync from the cache and answers undefined while none is cached", async () => {
    const clock = new ManualClock(Date.now());
    const seq = await sequence({ clock, batchSize: 100, minBatchSize: 100, maxClockSkewMs: 3000 });
    await passFenceManually(seq, clock, 3000);
    expect(seq.tryNextIdSync(1)).toBeUndefined(); // nothing cached yet: a refill starts
    let id: bigint | undefined;
    for (let i = 0; i < 50 && id === undefined; i++) {
      await sleep(10);
      id = seq.tryNextIdSync(1);
    }
    expect(id).toBeDefined();
    const more: bigint[] = [];
    for (let i = 0; i < 60; i++) more.push(seq.tryNextIdSync(1)!);
    expect(more.every((x) => typeof x === "bigint")).toBe(true);
    expect(duplicates([id!, ...more])).toEqual([]);
  });

  it("locks a used-up second for 1 s and answers an error until the next second", async () => {
    const clock = new ManualClock(Date.now());
    const seq = await sequence({
      layout: tinyLayout,
      clock,
      batchSize: 5,
      minBatchSize: 5,
      maxWaitMs: 200,
      maxClockSkewMs: 3000,
    });
    const second = await passFenceManually(seq, clock, 3000);
    const ids = await seq.nextIds(2, 16);
    expect(ids.map((id) => seq.parse(id).sequence)).toEqual([...Array(16).keys()]);
    expect(new Set(ids.map((id) => seq.parse(id).second))).toEqual(new Set([second]));
    // The range that reached the top set the lock.
    const lockTtl = await fx.raw.pttl(seq.keys.lock(second));
    expect(lockTtl).toBeGreaterThan(0);
    expect(lockTtl).toBeLessThanOrEqual(1000);
    // The clock is stuck in the used-up second: waiting is longer than maxWaitMs, so it fails.
    await expect(seq.nextId(2)).rejects.toMatchObject({ code: ErrorCodes.SEQUENCE_EXHAUSTED });
    // Another client asking for that second gets the script's error while the lock lasts.
    const other = await started(
      new RedisSequence({
        url: fx.redis.url,
        namespace: seq.keys.namespace,
        layout: tinyLayout,
        clock,
        maxWaitMs: 0,
        maxClockSkewMs: 3000,
      }),
    );
    fx.open.push(other);
    await expect(other.nextId(2)).rejects.toMatchObject({ code: ErrorCodes.SEQUENCE_EXHAUSTED });
    expect(other.state().stats.refused.locked).toBe(1);
    // After the lock expired the counter itself still refuses the second (and locks it again).
    await sleep(lockTtl + 50);
    const third = await started(
      new RedisSequence({
        url: fx.redis.url,
        namespace: seq.keys.namespace,
        layout: tinyLayout,
        clock,
        maxWaitMs: 0,
        maxClockSkewMs: 3000,
      }),
    );
    fx.open.push(third);
    await expect(third.nextId(2)).rejects.toMatchObject({ code: ErrorCodes.SEQUENCE_EXHAUSTED });
    expect(third.state().stats.refused.exhausted).toBe(1);
    expect(await fx.raw.pttl(seq.keys.lock(second))).toBeGreaterThan(0);
    // The next second has its full space.
    clock.advance(1000);
    const next = seq.parse(await seq.nextId(2));
    expect(next).toMatchObject({ second: second + 1, sequence: 0 });
  });

  it("waits for the next second when a second's sequences are used up", async () => {
    const seq = await sequence({ layout: tinyLayout, batchSize: 8, minBatchSize: 8 });
    const ids = await seq.nextIds(1, 40);
    expect(duplicates(ids)).toEqual([]);
    const perSecond = new Map<number, number[]>();
    for (const id of ids) {
      const { second, sequence } = seq.parse(id);
      perSecond.set(second, [...(perSecond.get(second) ?? []), sequence]);
    }
    expect(perSecond.size).toBeGreaterThanOrEqual(3);
    for (const sequences of perSecond.values()) {
      expect(sequences.length).toBeLessThanOrEqual(16);
      expect(new Set(sequences).size).toBe(sequences.length);
    }
    expect(seq.state().stats.waits).toBeGreaterThanOrEqual(1);
  });
});
