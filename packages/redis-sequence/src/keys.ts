// Redis key names of one namespace. Every key carries the same hash tag `{namespace}`, so all keys
// one allocation touches hash to one Redis Cluster slot and the Lua script may use them together.
import { checkRedisKeyPrefix, checkRedisNamespace } from "@leaf/redis-support";

const COMPONENT = "redis-sequence";

/** The keys of one namespace, and how they are named. */
export interface SequenceKeys {
  /** The namespace, as validated. */
  readonly namespace: string;
  /** The prefix before the hash tag ("leaf:" by default). */
  readonly keyPrefix: string;
  /** The hash tag every key carries: `{namespace}`. */
  readonly hashTag: string;
  /**
   * The counter of one second (Unix seconds), shared by all shards, or of one shard in that second
   * when `shard` is given (sequenceScope "shard"). Expires `keyTtlSeconds` after its last use.
   */
  sequence(second: number, shard?: number): string;
  /** The 1 s lock set when `sequence(second, shard)` has run out of sequence space. */
  lock(second: number, shard?: number): string;
  /**
   * The marker without expiry: a hash holding the run id of the Redis process that last served
   * the namespace and the second up to which allocations are refused after a restart.
   */
  marker(): string;
  /**
   * The settings marker without expiry: a hash holding the key prefix, sequence scope and layout
   * of the namespace's clients. Its name does not carry the key prefix (it is
   * `leaf-sequence:{namespace}:settings` whatever the prefix), so that clients with different
   * prefixes find the same one.
   */
  settings(): string;
}

/** The fixed start of the settings marker's name, which does not depend on keyPrefix. */
export const SETTINGS_KEY_PREFIX = "leaf-sequence:";

/**
 * Checks a namespace: 1 to 128 characters, letters, digits and `. _ : -`, starting with a letter or
 * digit (the check of `@leaf/redis-support`).
 */
export function checkNamespace(namespace: unknown): string {
  return checkRedisNamespace(COMPONENT, namespace);
}

/** Key names for `namespace` under `keyPrefix`; both are validated. */
export function sequenceKeys(namespace: string, keyPrefix = "leaf:"): SequenceKeys {
  const ns = checkNamespace(namespace);
  checkRedisKeyPrefix(COMPONENT, keyPrefix);
  const base = `${keyPrefix}{${ns}}:`;
  const suffix = (second: number, shard?: number) =>
    shard === undefined ? `${second}` : `${second}:${shard}`;
  return Object.freeze({
    namespace: ns,
    keyPrefix,
    hashTag: `{${ns}}`,
    sequence: (second: number, shard?: number) => `${base}seq:${suffix(second, shard)}`,
    lock: (second: number, shard?: number) => `${base}lock:${suffix(second, shard)}`,
    marker: () => `${base}marker`,
    settings: () => `${SETTINGS_KEY_PREFIX}{${ns}}:settings`,
  });
}
