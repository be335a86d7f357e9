// Options of a RedisSequence, their defaults, and their validation: every bad value is refused at
// construction with an error naming the key, the value seen and what is expected.
import { type Clock, configError, type Layout, layouts, systemClock } from "@leaf/core";
import type { Cluster, ClusterOptions, Redis, RedisOptions } from "ioredis";
import { checkSequenceLayout } from "./id-format";
import { checkNamespace } from "./keys";

const COMPONENT = "redis-sequence";

/**
 * Where Redis is, as a URL: "redis://[user:password@]host:port[/db]" ("rediss://" for TLS), or an
 * array of URLs of Redis Cluster nodes.
 */
export type RedisUrl = string | readonly string[];

/** An ioredis `Redis` or `Cluster` you created: it stays yours (close() does not quit it). */
export type RedisClient = Redis | Cluster;

/** A warning for the operator's log. */
export interface RedisSequenceWarning {
  type:
    | "eviction-policy"
    | "eviction-policy-unknown"
    | "redis-unavailable"
    | "fenced"
    | "random-fallback"
    | "clock-skew"
    | "clock-behind"
    | "layout-expiry";
  message: string;
  details?: Record<string, unknown>;
}

/** Options of {@link RedisSequence}. */
export interface RedisSequenceOptions {
  /** Where Redis is (see {@link RedisUrl}); or give `client`. */
  url?: RedisUrl;
  /** An ioredis client you created and keep (see {@link RedisClient}); or give `url`. */
  client?: RedisClient;
  /**
   * Ids are unique within a namespace (an order-id namespace, a user-id namespace, ...): 1 to 128
   * characters of letters, digits and `. _ : -`. It is the Redis Cluster hash tag of every key.
   */
  namespace: string;
  /** Prefix of every Redis key (default "leaf:"): keys are `leaf:{namespace}:seq:<second>`. */
  keyPrefix?: string;
  /**
   * Bit layout, with seconds as its unit (default `layouts.redisSequence`, 1 + 32 + 12 + 19 bits).
   */
  layout?: Layout;
  /** Time zone of the string form's yyyyMMddHHmmss (default "UTC"); see SequenceIdFormat. */
  timeZone?: string;
  /** Default prefix of the string form (default ""). */
  prefix?: string;
  /**
   * Largest range of sequences taken from Redis in one round trip (default 1000, or the layout's
   * whole sequence space when smaller). Ranges start at
   * `minBatchSize` and double while a second's demand outgrows them, halving again when a second
   * ends with much of its range unused, so quiet clients do not waste the shared sequence space.
   */
  batchSize?: number;
  /** Smallest range taken in one round trip (default min(16, batchSize)). */
  minBatchSize?: number;
  /**
   * Whose counter a second's sequences come from: "namespace" (default: one counter
   * per second shared by all shards, at most 2^sequenceBits ids per second in the namespace), or
   * "shard" (one counter per shard per second: 2^sequenceBits ids per second for each shard, at
   * the cost of a range per shard per second).
   */
  sequenceScope?: "namespace" | "shard";
  /**
   * Which clock gives the id's second: "application" (default: this machine's clock,
   * which Redis refuses when it is more than maxClockSkewMs from Redis TIME), or "redis" (Redis
   * TIME, tracked through the answer of every round trip, so that machines with skewed clocks
   * agree).
   */
  timeSource?: "application" | "redis";
  /**
   * The application clock (default: the system clock). With timeSource "redis" it only measures
   * elapsed time between round trips (default there: a monotonic clock).
   */
  clock?: Clock;
  /**
   * Largest distance in ms between the second a client asks for and Redis TIME (default 1000).
   * Requests further off are refused (CLOCK_SKEW). It bounds which seconds can have been handed out
   * before a Redis restart, so it also sizes the fence after one.
   */
  maxClockSkewMs?: number;
  /**
   * Extra ms added to the fence after a Redis restart or data loss (default 1000), covering the
   * clock difference between the old and the new Redis host after a failover.
   */
  fenceMarginMs?: number;
  /**
   * Seconds a second's counter lives after its last use (default 600). Must outlive
   * every request for that second: at least 2 × maxClockSkewMs + fenceMarginMs + 2 s.
   */
  keyTtlSeconds?: number;
  /** ms the lock lasts once a second's sequence space is used up (default 1000). */
  lockMs?: number;
  /** ms one round trip to Redis may take before it counts as failed (default 1000). */
  refillTimeoutMs?: number;
  /**
   * Longest an async call waits for the next second (its second's sequences used up) or for a
   * fence to pass, in ms (default 5000). Past it the call fails at once, without waiting.
   */
  maxWaitMs?: number;
  /**
   * What happens when Redis cannot be reached and the cached ranges of the current second are
   * used up: "error" (default: UNAVAILABLE), or "random": the sequence is
   * drawn at random. Random sequences are unique within this process only; another process, or
   * a range Redis hands out in the same second, can produce the SAME id. Use it only where a rare
   * duplicate is acceptable. A "random-fallback" warning is raised each time it engages.
   */
  whenRedisDown?: "error" | "random";
  /** ms to wait for Redis when starting (default 5000). */
  connectTimeoutMs?: number;
  /** ioredis options used when `redis` is a URL (for a Cluster: its `redisOptions`). */
  redisOptions?: RedisOptions;
  /** ioredis Cluster options used when `redis` is an array of URLs. */
  clusterOptions?: ClusterOptions;
  /** Random source in [0, 1) for the "random" fallback (default Math.random). */
  random?: () => number;
  /** Receives warnings (default: process.emitWarning). */
  onWarning?: (warning: RedisSequenceWarning) => void;
}

/** Options with defaults applied and validated. */
export interface ResolvedOptions {
  namespace: string;
  keyPrefix: string;
  layout: Layout;
  timeZone: string;
  prefix: string;
  batchSize: number;
  minBatchSize: number;
  sequenceScope: "namespace" | "shard";
  timeSource: "application" | "redis";
  clock: Clock;
  maxClockSkewMs: number;
  fenceMarginMs: number;
  keyTtlSeconds: number;
  lockMs: number;
  refillTimeoutMs: number;
  maxWaitMs: number;
  whenRedisDown: "error" | "random";
  connectTimeoutMs: number;
  random: () => number;
  onWarning: (warning: RedisSequenceWarning) => void;
}

/** A monotonic clock in ms since the Unix epoch: the default with timeSource "redis". */
export const monotonicClock: Clock = {
  now: () => performance.timeOrigin + performance.now(),
  sleepSync: (ms: number) => systemClock.sleepSync(ms),
};

function integer(key: string, value: unknown, min: number, max: number): number {
  if (typeof value !== "number" || !Number.isInteger(value) || value < min || value > max) {
    throw configError(
      COMPONENT,
      key,
      value,
      `an integer from ${min.toLocaleString("en-US")} to ${max.toLocaleString("en-US")}`,
    );
  }
  return value;
}

function oneOf<T extends string>(key: string, value: unknown, allowed: readonly T[]): T {
  if (!allowed.includes(value as T)) {
    throw configError(COMPONENT, key, value, `one of ${allowed.map((a) => `"${a}"`).join(", ")}`);
  }
  return value as T;
}

function defaultWarning(warning: RedisSequenceWarning): void {
  process.emitWarning(warning.message, {
    code: `LEAF_REDIS_SEQUENCE_${warning.type.toUpperCase()}`,
  });
}

/** Applies defaults and validates everything but `redis` (see connection.ts). */
export function resolveOptions(options: RedisSequenceOptions): ResolvedOptions {
  if (typeof options !== "object" || options === null) {
    throw configError(COMPONENT, "options", options, "an object with at least redis and namespace");
  }
  const namespace = checkNamespace(options.namespace);
  const layout = checkSequenceLayout(options.layout ?? layouts.redisSequence);
  const capacity = layout.maxSequence + 1;
  const batchSize = integer(
    "batchSize",
    options.batchSize ?? Math.min(1000, capacity),
    1,
    capacity,
  );
  const minBatchSize = integer(
    "minBatchSize",
    options.minBatchSize ?? Math.min(16, batchSize),
    1,
    batchSize,
  );
  const timeSource = oneOf("timeSource", options.timeSource ?? "application", [
    "application",
    "redis",
  ] as const);
  const clock = options.clock ?? (timeSource === "redis" ? monotonicClock : systemClock);
  if (typeof clock !== "object" || clock === null || typeof clock.now !== "function") {
    throw configError(COMPONENT, "clock", clock, "a Clock ({ now(): number, sleepSync(ms) })");
  }
  const maxClockSkewMs = integer("maxClockSkewMs", options.maxClockSkewMs ?? 1000, 0, 300_000);
  const fenceMarginMs = integer("fenceMarginMs", options.fenceMarginMs ?? 1000, 0, 300_000);
  const minTtl = Math.ceil((2 * maxClockSkewMs + fenceMarginMs) / 1000) + 2;
  const keyTtlSeconds = integer("keyTtlSeconds", options.keyTtlSeconds ?? 600, minTtl, 86_400);
  const random = options.random ?? Math.random;
  if (typeof random !== "function") {
    throw configError(COMPONENT, "random", random, "a function returning a number in [0, 1)");
  }
  const onWarning = options.onWarning ?? defaultWarning;
  if (typeof onWarning !== "function") {
    throw configError(COMPONENT, "onWarning", onWarning, "a function");
  }
  const prefix = options.prefix ?? "";
  if (typeof prefix !== "string" || prefix.length > 256) {
    throw configError(COMPONENT, "prefix", prefix, "a string of at most 256 characters");
  }
  return {
    namespace,
    keyPrefix: options.keyPrefix ?? "leaf:",
    layout,
    timeZone: options.timeZone ?? "UTC",
    prefix,
    batchSize,
    minBatchSize,
    sequenceScope: oneOf("sequenceScope", options.sequenceScope ?? "namespace", [
      "namespace",
      "shard",
    ] as const),
    timeSource,
    clock,
    maxClockSkewMs,
    fenceMarginMs,
    keyTtlSeconds,
    lockMs: integer("lockMs", options.lockMs ?? 1000, 1, 60_000),
    refillTimeoutMs: integer("refillTimeoutMs", options.refillTimeoutMs ?? 1000, 1, 60_000),
    maxWaitMs: integer("maxWaitMs", options.maxWaitMs ?? 5000, 0, 600_000),
    whenRedisDown: oneOf("whenRedisDown", options.whenRedisDown ?? "error", [
      "error",
      "random",
    ] as const),
    connectTimeoutMs: integer("connectTimeoutMs", options.connectTimeoutMs ?? 5000, 1, 600_000),
    random,
    onWarning,
  };
}
