// Faults against a private Redis: a restart without persistence is fenced instead of repeating
// sequences, a paused Redis leaves the cache serving and then the configured behaviour, clocks too
// far from Redis TIME are refused, and timeSource "redis" makes skewed machines agree.
import { ErrorCodes, isLeafError, ManualClock } from "@leaf/core";
import { freePort, started } from "@leaf/testkit";
import { describe, expect, it } from "vitest";
import { RedisSequence } from "../src/index";
import {
  duplicates,
  freshNamespace,
  passFenceManually,
  redisFixture,
  sleep,
  warningSink,
} from "./helpers";

const fx = redisFixture(
  "fault",
  { maxClockSkewMs: 3000, fenceMarginMs: 0, refillTimeoutMs: 300 },
  { useEnv: false },
);
const sequence = fx.sequence;

async function failure(
  promise: Promise<unknown>,
): Promise<Error & { code?: string; details?: Record<string, unknown> }> {
  try {
    await promise;
  } catch (error) {
    return error as Error;
  }
  throw new Error("expected a failure, got a value");
}

describe("Redis restarted without persistence", () => {
  it("refuses the seconds it may have handed out before, until the fence passes", async () => {
    const clock = new ManualClock(Date.now());
    const sinkA = warningSink();
    const a = await sequence({
      clock,
      batchSize: 100,
      minBatchSize: 100,
      maxWaitMs: 200,
      onWarning: sinkA.onWarning,
    });
    const second = await passFenceManually(a, clock, 3000);
    const before = await a.nextIds(0, 50); // half of A's range: [0, 99] of `second`
    await fx.redis.kill();
    await fx.redis.start();
    expect(await fx.raw.exists(a.keys.marker())).toBe(0); // Redis came back empty
    // The seed's script would now hand sequences 0.. of `second` to the next client: a duplicate.
    const b = await started(
      new RedisSequence({
        url: fx.redis.url,
        namespace: a.keys.namespace,
        clock,
        maxClockSkewMs: 3000,
        fenceMarginMs: 0,
        maxWaitMs: 200,
      }),
    );
    fx.open.push(b);
    const refused = await failure(b.nextId(0));
    expect(isLeafError(refused, ErrorCodes.UNAVAILABLE)).toBe(true);
    expect(refused.message).toContain("restarted");
    expect(refused.details?.fenceSecond).toBeGreaterThanOrEqual(second);
    expect(b.state().status).toBe("fenced");
    // A still serves what it holds: those sequences were granted to it before the restart.
    const cached: bigint[] = [];
    for (let id = a.tryNextIdSync(0); id !== undefined; id = a.tryNextIdSync(0)) cached.push(id);
    expect(cached.length).toBeGreaterThanOrEqual(50);
    await expect(a.nextId(0)).rejects.toMatchObject({ code: ErrorCodes.UNAVAILABLE });
    expect(sinkA.warnings.map((w) => w.type)).toContain("fenced");
    // Once the clock is past the fence both get fresh ranges of a new second.
    const next = await passFenceManually(b, clock, 3000);
    const after = [...(await a.nextIds(0, 120)), ...(await b.nextIds(0, 120))];
    expect(duplicates([...before, ...cached, ...after])).toEqual([]);
    for (const id of after) expect(a.parse(id).second).toBe(next);
  });

  it("fences when the marker names another Redis process (restart with old data, failover)", async () => {
    const clock = new ManualClock(Date.now());
    const seq = await sequence({ clock, maxWaitMs: 100 });
    const second = await passFenceManually(seq, clock, 3000);
    await seq.nextId(1);
    // What an RDB restore or a promoted replica looks like: the data is there, the process is new.
    await fx.raw.hset(seq.keys.marker(), "run_id", "0000000000000000000000000000000000000000");
    const other = await started(
      new RedisSequence({
        url: fx.redis.url,
        namespace: seq.keys.namespace,
        clock,
        maxClockSkewMs: 3000,
        fenceMarginMs: 0,
        maxWaitMs: 100,
      }),
    );
    fx.open.push(other);
    await expect(other.nextId(1)).rejects.toMatchObject({ code: ErrorCodes.UNAVAILABLE });
    expect(other.state().fence?.untilSecond).toBeGreaterThanOrEqual(second);
    expect(await fx.raw.hget(seq.keys.marker(), "reason")).toBe("restarted");
  });

  it("keeps every id unique when Redis is killed and restarted while ids flow", async () => {
    const namespace = freshNamespace("flow");
    const make = async () => {
      const created = await started(
        new RedisSequence({
          url: fx.redis.url,
          namespace,
          maxClockSkewMs: 500,
          fenceMarginMs: 0,
          refillTimeoutMs: 300,
          batchSize: 200,
          onWarning: () => {},
        }),
      );
      fx.open.push(created);
      return created;
    };
    const clients = [await make(), await make(), await make()];
    await clients[0]!.nextId(0); // past the new namespace's fence
    const ids: bigint[] = [];
    const errors = new Map<string, number>();
    let running = true;
    const loops = clients.map(async (client, c) => {
      let i = 0;
      while (running) {
        try {
          ids.push(await client.nextId((c * 1000 + i++) % 4096));
        } catch (error) {
          const code = isLeafError(error) ? error.code : String(error);
          errors.set(code, (errors.get(code) ?? 0) + 1);
          await sleep(5);
        }
        if (i % 50 === 0) await sleep(1); // leave the event loop to the test
      }
    });
    await sleep(800);
    // Kill early in a second, so that Redis is back within the same second: without the fence the
    // clients would now be handed that second's sequences from 0 again.
    while (Date.now() % 1000 > 300) await sleep(10);
    const beforeKill = ids.length;
    await fx.redis.kill();
    await fx.redis.start();
    await sleep(3500);
    running = false;
    await Promise.all(loops);
    expect(beforeKill).toBeGreaterThan(100);
    expect(ids.length).toBeGreaterThan(beforeKill + 100); // ids flowed again after the restart
    expect(duplicates(ids)).toEqual([]);
    expect([...errors.keys()].every((code) => code === ErrorCodes.UNAVAILABLE)).toBe(true);
    expect(clients.some((c) => c.state().stats.refused.fenced > 0)).toBe(true);
  });
});

describe("Redis paused", () => {
  it("serves the cached range, then fails with UNAVAILABLE, then recovers", async () => {
    const clock = new ManualClock(Date.now());
    const sink = warningSink();
    const seq = await sequence({
      clock,
      batchSize: 100,
      minBatchSize: 100,
      onWarning: sink.onWarning,
    });
    await passFenceManually(seq, clock, 3000);
    const first = await seq.nextId(4);
    fx.redis.pause();
    try {
      const cached = await seq.nextIds(4, 99); // the rest of the range, without Redis
      expect(duplicates([first, ...cached])).toEqual([]);
      const error = await failure(seq.nextId(4));
      expect(isLeafError(error, ErrorCodes.UNAVAILABLE)).toBe(true);
      expect(error.message).toContain(fx.redis.url.replace("redis://", ""));
      expect(seq.state().status).toBe("unavailable");
      // While it is down, calls fail at once instead of waiting for Redis each time.
      await expect(seq.nextId(4)).rejects.toMatchObject({ code: ErrorCodes.UNAVAILABLE });
      expect(sink.warnings.map((w) => w.type)).toEqual(["redis-unavailable"]);
    } finally {
      fx.redis.resume();
    }
    let id: bigint | undefined;
    for (let i = 0; i < 50 && id === undefined; i++) {
      id = await seq.nextId(4).catch(() => undefined);
      if (id === undefined) await sleep(100);
    }
    expect(id).toBeDefined();
    expect(seq.state().status).toBe("ready");
  });

  it("hands out random sequences with a warning when whenRedisDown is random", async () => {
    const clock = new ManualClock(Date.now());
    const sink = warningSink();
    const seq = await sequence({
      clock,
      batchSize: 100,
      minBatchSize: 100,
      whenRedisDown: "random",
      onWarning: sink.onWarning,
    });
    const second = await passFenceManually(seq, clock, 3000);
    const first = await seq.nextId(4); // caches the range [0, 99] of `second`
    fx.redis.pause();
    let rest: bigint[];
    try {
      rest = await Promise.all(Array.from({ length: 599 }, (_, i) => seq.nextId(i % 3)));
      expect(seq.state().status).toBe("random-fallback");
    } finally {
      fx.redis.resume();
    }
    const ids = [first, ...rest];
    expect(duplicates(ids)).toEqual([]);
    const parsed = ids.map((id) => seq.parse(id));
    expect(parsed.every((p) => p.second === second)).toBe(true);
    // 100 ids from the cached range, 500 random ones, none of which falls inside that range.
    expect(parsed.filter((p) => p.sequence < 100)).toHaveLength(100);
    expect(seq.state().stats.randomIds).toBe(500);
    const fallback = sink.warnings.filter((w) => w.type === "random-fallback");
    expect(fallback).toHaveLength(1);
    expect(fallback[0]!.message).toContain("same id");
  });
});

describe("clocks", () => {
  it("refuses a second more than maxClockSkewMs from Redis TIME with CLOCK_SKEW", async () => {
    const clock = new ManualClock(Date.now() + 3_600_000);
    const sink = warningSink();
    const seq = await sequence({ clock, maxClockSkewMs: 1000, onWarning: sink.onWarning });
    expect(sink.warnings.map((w) => w.type)).toContain("clock-skew");
    const error = await failure(seq.nextId(0));
    expect(isLeafError(error, ErrorCodes.CLOCK_SKEW)).toBe(true);
    expect(error.message).toContain("Redis TIME");
    expect(error.message).toContain(new Date(clock.now()).toISOString().slice(0, 16));
    expect(seq.state().redis.clockOffsetMs).toBeLessThan(-3_500_000);
  });

  it("takes the second from Redis TIME with timeSource redis, whatever the local clock says", async () => {
    // A machine whose clock is 25 years behind, but runs at the normal rate.
    const behind = Date.now() - Date.UTC(2001, 0, 1);
    const skewed = { now: () => Date.now() - behind, sleepSync: () => {} };
    const seq = await sequence({ timeSource: "redis", clock: skewed, maxClockSkewMs: 1000 });
    const before = Math.floor(Date.now() / 1000);
    const id = await seq.nextId(3);
    const after = Math.floor(Date.now() / 1000);
    const { second } = seq.parse(id);
    expect(second).toBeGreaterThanOrEqual(before);
    expect(second).toBeLessThanOrEqual(after + 2); // the fence may have pushed it a little
    expect(seq.state().redis.clockOffsetMs).toBeGreaterThan(700_000_000_000);
  });
});

describe("lifecycle", () => {
  it("fails to start with UNAVAILABLE naming where Redis was expected", async () => {
    const port = await freePort();
    const error = await failure(
      started(
        new RedisSequence({
          url: `redis://127.0.0.1:${port}`,
          namespace: "nowhere",
          connectTimeoutMs: 500,
          onWarning: () => {},
        }),
      ),
    );
    expect(isLeafError(error, ErrorCodes.UNAVAILABLE)).toBe(true);
    expect(error.message).toContain(`127.0.0.1:${port}`);
  });

  it("refuses calls after close and leaves a client passed in open", async () => {
    const seq = await sequence({ client: fx.raw, maxClockSkewMs: 500 });
    await seq.nextId(0);
    await seq.close();
    expect(() => seq.tryNextIdSync(0)).toThrow(/closed/);
    await expect(seq.nextId(0)).rejects.toMatchObject({ code: ErrorCodes.CLOSED });
    expect(seq.state().status).toBe("closed");
    expect(await fx.raw.ping()).toBe("PONG");
  });

  it("loads its script again after Redis forgot it", async () => {
    const seq = await sequence({
      client: fx.raw,
      batchSize: 10,
      minBatchSize: 10,
      maxClockSkewMs: 500,
    });
    await seq.nextId(0);
    await fx.raw.script("FLUSH");
    await expect(seq.nextIds(0, 30)).resolves.toHaveLength(30);
  });
});
