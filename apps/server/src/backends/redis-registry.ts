// The Redis registry: worker ids leased by Lua scripts, judged by Redis's clock. Its Redis defaults
// to the redis sequence's.
import { def } from "../config-def";
import { integer, nonEmpty, redisUrl } from "../config-readers";
import type { RegistryBackend } from "./backend";

export const REDIS_REGISTRY_KEYS = [
  def("snowflake.redis.url", {
    type: "redis:// URL",
    defaultText: "redisSequence.url",
    doc: "Redis registry: the Redis that leases worker ids (`rediss://` for TLS).",
    secret: true,
    read: redisUrl,
  }),
  def("snowflake.redis.keyPrefix", {
    type: "string without { }",
    defaultText: "leaf:registry:",
    doc: "Redis registry: prefix of its keys (`<prefix>{<name>}:leases`, `:stamps`, `:marker`).",
    read: nonEmpty("a key prefix", 200),
  }),
  def("snowflake.redis.leaseMs", {
    type: "500 to 600,000",
    defaultText: "30000",
    doc: "Redis registry: how long a lease lasts without renewal, by Redis's clock. The holder fences itself at leaseMs - leaseMs / 5 after the last renewal Redis confirmed; after Redis loses its data no id is granted for leaseMs.",
    read: integer(500, 600_000),
  }),
] as const;

/** The Redis registry's settings. */
export interface RedisRegistrySettings {
  kind: "redis";
  url: string;
  keyPrefix: string | undefined;
  leaseMs: number | undefined;
}

export const redisRegistry: RegistryBackend<
  "redis",
  RedisRegistrySettings,
  typeof REDIS_REGISTRY_KEYS
> = {
  kind: "redis",
  keys: REDIS_REGISTRY_KEYS,
  addressKeys: ["snowflake.redis.url"],
  shared: true,
  settings(v) {
    // Its own URL, else the redis sequence's Redis.
    const urlKey = v.named("snowflake.redis.url") ? "snowflake.redis.url" : "redisSequence.url";
    const url = v.optional(urlKey);
    if (url === undefined) {
      if (!v.named(urlKey)) {
        v.missing(
          "snowflake.redis.url",
          "the snowflake registry is redis, so Redis's URL is needed (snowflake.redis.url, or redisSequence.url)",
        );
      }
      return undefined;
    }
    const keyPrefix = v.optional("snowflake.redis.keyPrefix");
    if (keyPrefix !== undefined && /[{}]/.test(keyPrefix)) {
      v.problem(
        "snowflake.redis.keyPrefix",
        `invalid ${v.label("snowflake.redis.keyPrefix")}: ${JSON.stringify(keyPrefix)}; expected no { or } (the service name is the keys' Redis Cluster hash tag)`,
      );
    }
    return { kind: "redis", url, keyPrefix, leaseMs: v.optional("snowflake.redis.leaseMs") };
  },
  leasingChoice: "redis",
  grantsRequestedId: () => true,
  reuse: () => ({ reused: true, configured: false }),
  async create(settings, { snowflake }) {
    const { RedisRegistry } = await import("@leaf/registry-redis");
    return new RedisRegistry({
      url: settings.url,
      ...(settings.keyPrefix !== undefined ? { keyPrefix: settings.keyPrefix } : {}),
      ...(settings.leaseMs !== undefined ? { leaseMs: settings.leaseMs } : {}),
      toleranceMs: snowflake.toleranceMs,
    });
  },
  describe: (settings) => ({
    kind: "redis",
    mode: "lease",
    target: redisTarget(settings.url),
    shared: true,
  }),
};

/** "host:6379/0": a Redis URL without its user or password. */
export function redisTarget(url: string): string {
  const parsed = new URL(url);
  return `${parsed.hostname}:${parsed.port || "6379"}${parsed.pathname.length > 1 ? parsed.pathname : ""}`;
}
