// Shared by the tests: unique namespaces (tests may share an external Redis), a raw ioredis client
// for looking at the keys, warnings collected per sequence, and waiting out a new namespace's
// fence.
import { randomBytes } from "node:crypto";
import { type Clock, ManualClock } from "@leaf/core";
import {
  countDuplicates,
  type RedisHandle,
  type RedisOptions,
  started,
  startRedis,
} from "@leaf/testkit";
import { Redis } from "ioredis";
import { afterAll, beforeAll } from "vitest";
import { RedisSequence, type RedisSequenceOptions, type RedisSequenceWarning } from "../src/index";

/** A namespace no other test uses. */
export function freshNamespace(label: string): string {
  return `t-${label}-${randomBytes(4).toString("hex")}`;
}

/** A plain client for reading and writing keys behind the sequence's back. */
export function rawClient(url: string): Redis {
  return new Redis(url, { maxRetriesPerRequest: 1, lazyConnect: false });
}

/** Collects warnings instead of printing them. */
export function warningSink(): {
  warnings: RedisSequenceWarning[];
  onWarning: (w: RedisSequenceWarning) => void;
} {
  const warnings: RedisSequenceWarning[] = [];
  return { warnings, onWarning: (w) => warnings.push(w) };
}

/** Resolves after `ms` of real time. */
export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/**
 * For a sequence on a ManualClock: moves the clock to 100 ms into the first second after the
 * namespace's fence and waits until real time (Redis TIME) is close enough to it that Redis
 * accepts that second (within `maxSkewMs`). Returns the second the clock now shows.
 */
export async function passFenceManually(
  sequence: RedisSequence,
  clock: ManualClock,
  maxSkewMs: number,
): Promise<number> {
  const fence = sequence.state().fence?.untilSecond ?? Math.floor(Date.now() / 1000);
  const second = fence + 1;
  clock.set(second * 1000 + 100);
  const readyAt = second * 1000 + 100 - maxSkewMs + 100;
  while (Date.now() < readyAt) await sleep(Math.min(200, readyAt - Date.now()));
  return second;
}

/** A ManualClock at the current wall-clock time. */
export function manualClockNow(): ManualClock {
  return new ManualClock(Date.now());
}

/** Asserts-free duplicate finder: the ids seen more than once. */
export function duplicates(ids: Iterable<bigint>): bigint[] {
  return countDuplicates([ids], Number.POSITIVE_INFINITY).examples;
}

export type { Clock };

/** A private Redis for one test file, a raw client on it, and sequences closed after the file. */
export interface RedisFixture {
  redis: RedisHandle;
  raw: Redis;
  /** Sequences to close in afterAll (tests add the ones they create themselves). */
  open: RedisSequence[];
  /** A started sequence on a fresh namespace with the file's defaults and `options`. */
  sequence(options?: Partial<RedisSequenceOptions>): Promise<RedisSequence>;
}

/** Registers beforeAll/afterAll for a {@link RedisFixture}; `label` names its namespaces. */
export function redisFixture(
  label: string,
  defaults: Partial<RedisSequenceOptions>,
  start?: RedisOptions,
): RedisFixture {
  const fx = {
    open: [] as RedisSequence[],
    async sequence(options: Partial<RedisSequenceOptions> = {}) {
      const created = await started(
        new RedisSequence({
          // A test that passes its own client connects through it instead.
          ...((options.client ?? defaults.client) ? {} : { url: fx.redis.url }),
          namespace: freshNamespace(label),
          onWarning: warningSink().onWarning,
          // A Redis round trip can pass the default 1 s on a loaded 2-core machine (seen in a
          // fresh-clone run); files that time out on purpose set their own.
          refillTimeoutMs: 5000,
          ...defaults,
          ...options,
        }),
      );
      fx.open.push(created);
      return created;
    },
  } as RedisFixture;
  beforeAll(async () => {
    fx.redis = await startRedis(start);
    fx.raw = rawClient(fx.redis.url);
  });
  afterAll(async () => {
    await Promise.all(fx.open.map((s) => s.close()));
    fx.raw?.disconnect();
    await fx.redis?.dispose();
  });
  return fx;
}

/** The seconds (Unix) of `ids` in the layout of `sequence`, lowest and highest. */
export function secondsOf(
  sequence: RedisSequence,
  ids: readonly bigint[],
): { first: number; last: number } {
  let first = Number.POSITIVE_INFINITY;
  let last = Number.NEGATIVE_INFINITY;
  for (const id of ids) {
    const second = sequence.parse(id).second;
    if (second < first) first = second;
    if (second > last) last = second;
  }
  return { first, last };
}
