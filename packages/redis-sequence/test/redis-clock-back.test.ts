// A Redis whose clock is stepped back past the counters' expiry (timeSource "redis"). Redis runs
// with a wall clock offset it reads from a file the test rewrites (fixtures/wall-clock-offset.c,
// preloaded), so Redis TIME and key expiry really move. The seconds served before the step are
// never served again: Redis refuses every second at or below the highest second it granted whose
// counter is gone, the client waits (or fails with CLOCK_BEHIND past maxWaitMs), and grants resume
// above the high-water second.
import { execFileSync } from "node:child_process";
import { mkdtempSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { ErrorCodes, isLeafError } from "@leaf/core";
import { type RedisHandle, started, startRedis } from "@leaf/testkit";
import type { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { RedisSequence } from "../src/index";
import { duplicates, freshNamespace, rawClient, sleep, warningSink } from "./helpers";

const SHIM_SOURCE = fileURLToPath(new URL("./fixtures/wall-clock-offset.c", import.meta.url));
const TTL_SECONDS = 4;
const SHARD = 0;

let dir: string;
let clockFile: string;
let redis: RedisHandle;
let raw: Redis;
const open: RedisSequence[] = [];

/** Moves Redis's wall clock to real time + `offsetMs` (atomically: Redis reads the file often). */
function setRedisClock(offsetMs: number): void {
  const next = `${clockFile}.next`;
  writeFileSync(next, `${Math.round(offsetMs)}\n`);
  renameSync(next, clockFile);
}

/** Redis TIME in ms. */
async function redisNowMs(): Promise<number> {
  const [seconds, micros] = await raw.time();
  return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
}

/**
 * Builds the clock shim. libfaketime cannot be used here: with Debian's redis-server (linked with
 * jemalloc) it deadlocks at start (libfaketime issue #130).
 */
function buildShim(): string {
  const library = join(dir, "wall-clock-offset.so");
  try {
    execFileSync("cc", ["-shared", "-fPIC", "-O2", "-o", library, SHIM_SOURCE], {
      stdio: "pipe",
    });
  } catch (error) {
    throw new Error(
      `[leaf] [redis-sequence] test: could not compile ${SHIM_SOURCE} with cc (${String(error)}); ` +
        "install a C compiler: `bash scripts/install-services.sh` (Debian packages gcc libc6-dev)",
    );
  }
  return library;
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "leaf-redis-clock-"));
  clockFile = join(dir, "clock-offset-ms");
  setRedisClock(0);
  const library = buildShim();
  // The kit starts this wrapper, which becomes redis-server (exec): the pid the kit watches and
  // probes is Redis's own.
  const wrapper = join(dir, "redis-server-clock");
  writeFileSync(
    wrapper,
    [
      "#!/bin/sh",
      `export LD_PRELOAD='${library}'`,
      `export LEAF_CLOCK_OFFSET_FILE='${clockFile}'`,
      'exec redis-server "$@"',
      "",
    ].join("\n"),
    { mode: 0o755 },
  );
  redis = await startRedis({ useEnv: false, redisServer: wrapper });
  raw = rawClient(redis.url);
  // The clock really is Redis's to move.
  setRedisClock(3_600_000);
  const ahead = (await redisNowMs()) - Date.now();
  setRedisClock(0);
  expect(ahead).toBeGreaterThan(3_500_000);
});

afterAll(async () => {
  await Promise.all(open.map((s) => s.close()));
  raw?.disconnect();
  await redis?.dispose();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

async function sequence(namespace: string, maxWaitMs: number, onWarning = warningSink().onWarning) {
  const created = await started(
    new RedisSequence({
      url: redis.url,
      namespace,
      timeSource: "redis",
      maxClockSkewMs: 1000,
      fenceMarginMs: 0,
      keyTtlSeconds: TTL_SECONDS,
      batchSize: 40,
      minBatchSize: 40,
      refillTimeoutMs: 2000,
      maxWaitMs,
      onWarning,
    }),
  );
  open.push(created);
  return created;
}

describe('timeSource "redis" with Redis\'s clock stepped back past the key TTL', () => {
  it("never serves a second twice: refuses until Redis TIME passes the high-water second", async () => {
    setRedisClock(0);
    const namespace = freshNamespace("clockback");
    const sink = warningSink();
    const seq = await sequence(namespace, 20_000, sink.onWarning);
    const before: bigint[] = [];
    // Ids over about three seconds of Redis TIME, all for one shard so that a repeated sequence of
    // a second is a repeated id.
    before.push(...(await seq.nextIds(SHARD, 25))); // waits out the new namespace's fence
    const untilMs = (await redisNowMs()) + 3200;
    while ((await redisNowMs()) < untilMs) {
      before.push(...(await seq.nextIds(SHARD, 25)));
      await sleep(20);
    }
    const seconds = before.map((id) => seq.parse(id).second);
    const first = Math.min(...seconds);
    const highWater = Math.max(...seconds);
    expect(highWater - first).toBeGreaterThanOrEqual(2);

    // Redis's clock runs 60 s ahead while nobody asks: every counter expires, and Redis's
    // active expiry deletes it (KEYS hides an expired key that is not deleted yet, DBSIZE does
    // not).
    setRedisClock(60_000);
    const lasting = [seq.keys.marker(), seq.keys.settings()];
    for (let i = 0; i < 400 && (await raw.dbsize()) > lasting.length; i++) await sleep(50);
    expect(await raw.dbsize()).toBe(lasting.length);
    expect(await raw.exists(...lasting)).toBe(lasting.length);

    // Then it is stepped back to the first second served above: its counter is gone.
    setRedisClock(first * 1000 + 100 - Date.now());
    const redisSecond = Math.floor((await redisNowMs()) / 1000);
    expect(redisSecond).toBeLessThan(highWater);

    // A client that may not wait that long gets a clear error, not an id.
    const impatient = await sequence(namespace, 300);
    const refused = await impatient.nextId(SHARD).then(
      (id) => new Error(`got id ${id} (second ${impatient.parse(id).second})`),
      (error: unknown) => error,
    );
    expect(isLeafError(refused, ErrorCodes.CLOCK_BEHIND), String(refused)).toBe(true);
    expect((refused as Error).message).toContain("clock went back");
    expect(impatient.state().stats.refused.behind).toBeGreaterThan(0);

    // The first client waits it out: ids flow again once Redis TIME passes the high-water second.
    const after: bigint[] = [];
    const errors: string[] = [];
    const endMs = (highWater + 2) * 1000 + 300;
    while ((await redisNowMs()) < endMs) {
      try {
        after.push(...(await seq.nextIds(SHARD, 25)));
      } catch (error) {
        errors.push(isLeafError(error) ? error.code : String(error));
      }
      await sleep(20);
    }
    const all = [...before, ...after];
    expect(duplicates(all)).toEqual([]);
    expect(errors).toEqual([]);
    const afterSeconds = after.map((id) => seq.parse(id).second);
    // Only what was cached for the high-water second (granted once) is served from it; nothing
    // below it, and new grants come from later seconds.
    expect(afterSeconds.filter((s) => s < highWater)).toEqual([]);
    expect(afterSeconds.filter((s) => s > highWater).length).toBeGreaterThan(25);
    expect(seq.state().stats.refused.behind).toBeGreaterThan(0);
    expect(sink.warnings.map((w) => w.type)).toContain("clock-behind");
    expect(Number(await raw.hget(seq.keys.marker(), "high_second"))).toBeGreaterThan(highWater);
  }, 60_000);
});
