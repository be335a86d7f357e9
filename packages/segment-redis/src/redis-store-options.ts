// The Redis segment store's options, their checks and defaults, and its key names: every key of a
// namespace carries the hash tag `{namespace}`, so one Lua script may use them all (one Redis
// Cluster slot).
import { configError } from "@leaf/core";
import {
  checkEvictionMode,
  checkRedisKeyPrefix,
  checkRedisNamespace,
  type RedisEvictionCheck,
} from "@leaf/redis-support";
import type { Cluster, ClusterOptions, Redis, RedisOptions } from "ioredis";

/** The package's name in error messages. */
export const COMPONENT = "segment-redis";

/** Options of {@link RedisSegmentStore}. Give exactly one of `url` and `client`. */
export interface RedisSegmentStoreOptions {
  /**
   * `redis://[user:password@]host:port[/db]` (`rediss://` for TLS), or an array of Redis Cluster
   * node URLs. The store makes the client (commands are never sent twice: ioredis's
   * `autoResendUnfulfilledCommands` is off) and closes it on close().
   */
  url?: string | readonly string[];
  /**
   * An ioredis `Redis` (also one managed by Sentinel) or `Cluster` the caller made and owns:
   * close() leaves it open. Its options are the caller's.
   */
  client?: Redis | Cluster;
  /** ioredis options for a client made from `url`. */
  redisOptions?: RedisOptions;
  /** ioredis Cluster options when `url` is an array. */
  clusterOptions?: ClusterOptions;
  /**
   * The namespace (default "leaf"): the hash tag of every key, `<keyPrefix>{<namespace>}:...`.
   * Stores of one namespace share its tags; 1 to 128 letters, digits, `. _ : -`.
   */
  namespace?: string;
  /** Prefix of every key (default "leaf:segment:"), up to 64 letters, digits, `. _ : -`. */
  keyPrefix?: string;
  /**
   * Replicas that must acknowledge every write (WAIT) before it is answered (default 0). Recorded
   * in the namespace when it is created; a store with another value is refused. With 1 or more, a
   * failover to a promoted replica is accepted without a fence: set it to the number of replicas
   * that may be promoted (all of them). Not offered with Redis Cluster.
   */
  waitReplicas?: number;
  /** How long a write waits for its replicas, in ms (default 1,000). */
  waitTimeoutMs?: number;
  /**
   * Time limit of connecting and of each round trip, in ms (default 2,000; above waitTimeoutMs).
   */
  commandTimeoutMs?: number;
  /**
   * What start() does when Redis's `maxmemory-policy` may evict the keys (any `allkeys-*` policy;
   * the keys have no TTL): "refuse" (default) rejects with INVALID_CONFIG, "warn" warns once.
   */
  evictionCheck?: RedisEvictionCheck;
  /** Receives warnings (default: process.emitWarning with code LEAF_SEGMENT_REDIS_<TYPE>). */
  onWarning?: (warning: RedisStoreWarning) => void;
}

/** A warning of the store: something that makes ids risky without stopping them. */
export interface RedisStoreWarning {
  /**
   * "eviction-policy": Redis may evict the keys (evictionCheck "warn"); "eviction-policy-unknown":
   * the policy could not be read.
   */
  type: "eviction-policy" | "eviction-policy-unknown";
  message: string;
  details?: Record<string, unknown>;
}

/** The options after checks and defaults. */
export interface ResolvedStoreOptions {
  namespace: string;
  keyPrefix: string;
  waitReplicas: number;
  waitTimeoutMs: number;
  commandTimeoutMs: number;
  evictionCheck: RedisEvictionCheck;
  onWarning: (warning: RedisStoreWarning) => void;
}

/** Checks the options (not `url`/`client`: RedisLink does) and fills in the defaults. */
export function resolveStoreOptions(options: RedisSegmentStoreOptions): ResolvedStoreOptions {
  if (!options || typeof options !== "object") {
    throw configError(COMPONENT, "options", options, "{ url } or { client }, with a namespace");
  }
  const waitReplicas = integer("waitReplicas", options.waitReplicas ?? 0, 0, 64);
  const waitTimeoutMs = integer("waitTimeoutMs", options.waitTimeoutMs ?? 1000, 1, 600_000);
  const commandTimeoutMs = integer(
    "commandTimeoutMs",
    options.commandTimeoutMs ?? Math.max(2000, waitTimeoutMs + 1000),
    1,
    600_000,
  );
  if (waitReplicas > 0 && commandTimeoutMs <= waitTimeoutMs) {
    throw configError(
      COMPONENT,
      "commandTimeoutMs",
      commandTimeoutMs,
      `more than waitTimeoutMs (${waitTimeoutMs}): a write waits that long for its replicas`,
    );
  }
  const onWarning = options.onWarning ?? defaultWarning;
  if (typeof onWarning !== "function") {
    throw configError(COMPONENT, "onWarning", onWarning, "a function");
  }
  return {
    namespace: checkRedisNamespace(COMPONENT, options.namespace ?? "leaf"),
    keyPrefix: checkRedisKeyPrefix(COMPONENT, options.keyPrefix ?? "leaf:segment:"),
    waitReplicas,
    waitTimeoutMs,
    commandTimeoutMs,
    evictionCheck: checkEvictionMode(COMPONENT, options.evictionCheck),
    onWarning,
  };
}

/** The key names of one namespace. */
export interface StoreKeys {
  /** The namespace's marker: a hash without expiry (see the README's "How it works"). */
  readonly marker: string;
  /** The common start of every tag's key. */
  readonly tagPrefix: string;
  /** The key of one tag: a hash of `max_id`, `step`, `version`, `description`, `updated_ms`. */
  tag(tag: string): string;
}

/** Key names for `namespace` under `keyPrefix` (both checked already). */
export function storeKeys(namespace: string, keyPrefix: string): StoreKeys {
  const base = `${keyPrefix}{${namespace}}:`;
  const tagPrefix = `${base}tag:`;
  return Object.freeze({
    marker: `${base}marker`,
    tagPrefix,
    tag: (tag: string) => `${tagPrefix}${tag}`,
  });
}

function integer(key: string, value: unknown, min: number, max: number): number {
  if (typeof value !== "number" || !Number.isSafeInteger(value) || value < min || value > max) {
    throw configError(COMPONENT, key, value, `an integer from ${min} to ${max}`);
  }
  return value;
}

function defaultWarning(warning: RedisStoreWarning): void {
  process.emitWarning(warning.message, {
    code: `LEAF_SEGMENT_REDIS_${warning.type.toUpperCase().replaceAll("-", "_")}`,
  });
}
