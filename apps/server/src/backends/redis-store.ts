// The Redis segment store: one hash per tag moved by Lua scripts, and a marker per namespace that
// fences the namespace after a Redis restart or failover that may have lost writes. The marker is
// created once by an operator (`leaf store create-namespace`), and a fence lifted by one
// (`leaf store lift-fence RAISE_BY`): the server never does either on its own.
import { ErrorCodes, LeafError } from "@leaf/core";
import { checkRedisKeyPrefix, checkRedisNamespace } from "@leaf/redis-support";
import { RedisSegmentStore } from "@leaf/segment-redis";
import { def } from "../config-def";
import { Expected, integer, nonEmpty, redisUrl, text } from "../config-readers";
import type { StoreBackend } from "./backend";
import { redisTarget } from "./redis-registry";

const DEFAULT_PREFIX = "leaf:segment:";

/** Reads a Redis URL, or several comma-separated ones (the nodes of a Redis Cluster). */
function redisUrls(raw: unknown): string {
  const t = text(raw);
  if (t === undefined) throw new Expected("a Redis URL: redis://[user:password@]host:6379[/db]");
  for (const part of t.split(",")) redisUrl(part.trim());
  return t;
}

export const REDIS_STORE_KEYS = [
  def("segment.redis.url", {
    type: "redis:// URL, or several for Redis Cluster",
    defaultText: "(none)",
    doc: "Redis of the segment store (`rediss://` for TLS; several comma-separated URLs: the nodes of a Redis Cluster). Its namespace is created once with `leaf store create-namespace`.",
    secret: true,
    read: redisUrls,
  }),
  def("segment.redis.namespace", {
    type: "letters, digits, . _ : -",
    defaultText: "name",
    doc: "Tags are kept per namespace; it is the Redis Cluster hash tag of every key.",
    read: nonEmpty("a namespace", 128),
  }),
  def("segment.redis.keyPrefix", {
    type: "string without { }",
    defaultText: DEFAULT_PREFIX,
    doc: "Prefix of the store's keys (`<prefix>{<namespace>}:tag:<tag>`, `:marker`).",
    read: nonEmpty("a key prefix", 64),
  }),
  def("segment.redis.waitReplicas", {
    type: "0 to 16",
    default: 0,
    doc: "Replicas every write waits for (Redis WAIT). 0: a failover fences the namespace until an operator lifts it; 1 or more: a promotion of a replica that confirmed every write is accepted. Fixed when the namespace is created.",
    read: integer(0, 16),
  }),
  def("segment.redis.waitTimeoutMs", {
    type: "10 to 60,000",
    defaultText: "1000",
    doc: "How long a write waits for its replicas before the range is refused (a gap, never a repeat).",
    read: integer(10, 60_000),
  }),
] as const;

/** The Redis store's settings. */
export interface RedisStoreSettings {
  kind: "redis";
  /** One URL, or the nodes of a Redis Cluster. */
  urls: string[];
  namespace: string;
  keyPrefix: string;
  waitReplicas: number;
  waitTimeoutMs: number | undefined;
}

function build(settings: RedisStoreSettings): RedisSegmentStore {
  return new RedisSegmentStore({
    url: settings.urls.length === 1 ? settings.urls[0] : settings.urls,
    namespace: settings.namespace,
    keyPrefix: settings.keyPrefix,
    waitReplicas: settings.waitReplicas,
    ...(settings.waitTimeoutMs !== undefined ? { waitTimeoutMs: settings.waitTimeoutMs } : {}),
  });
}

function target(settings: RedisStoreSettings): string {
  return `${settings.urls.map(redisTarget).join(",")} ${settings.keyPrefix}{${settings.namespace}}`;
}

export const redisStore: StoreBackend<"redis", RedisStoreSettings, typeof REDIS_STORE_KEYS> = {
  kind: "redis",
  keys: REDIS_STORE_KEYS,
  addressKeys: ["segment.redis.url"],
  shared: true,
  settings(v) {
    const url = v.optional("segment.redis.url");
    if (url === undefined) {
      if (!v.named("segment.redis.url")) {
        v.missing("segment.redis.url", "segment.store is redis, so Redis's URL is needed");
      }
      return undefined;
    }
    const namespace = v.optional("segment.redis.namespace") ?? v.get("name");
    const keyPrefix = v.optional("segment.redis.keyPrefix") ?? DEFAULT_PREFIX;
    for (const [key, check, value] of [
      ["segment.redis.namespace", checkRedisNamespace, namespace],
      ["segment.redis.keyPrefix", checkRedisKeyPrefix, keyPrefix],
    ] as const) {
      try {
        check("server", value);
      } catch (error) {
        v.invalid(key, error);
        return undefined;
      }
    }
    return {
      kind: "redis",
      urls: url.split(",").map((u) => u.trim()),
      namespace,
      keyPrefix,
      waitReplicas: v.get("segment.redis.waitReplicas"),
      waitTimeoutMs: v.optional("segment.redis.waitTimeoutMs"),
    };
  },
  async open(settings) {
    const store = build(settings);
    try {
      // The eviction check; then the marker: none, or a fence, fails the start with what to do.
      await store.start();
      const state = await store.inspect();
      if (!state.exists) {
        throw new LeafError({
          component: "server",
          code: ErrorCodes.UNAVAILABLE,
          message:
            `the Redis segment namespace ${settings.keyPrefix}{${settings.namespace}} has no marker on ${settings.urls.map(redisTarget).join(",")}: ` +
            "a new namespace is created once with `leaf store create-namespace` (same configuration). " +
            "If it existed before, Redis lost it (a restart without persistence, a flush): its tags' max ids may be gone too; " +
            "restore them above every id handed out before creating it again (see @leaf/segment-redis's README)",
          details: { key: "segment.redis.namespace", namespace: settings.namespace },
        });
      }
      if (state.fence) {
        throw new LeafError({
          component: "server",
          code: ErrorCodes.UNAVAILABLE,
          message:
            `the Redis segment namespace ${settings.keyPrefix}{${settings.namespace}} is fenced (${state.fence.reason}` +
            `${state.fence.at !== undefined ? ` at ${new Date(state.fence.at).toISOString()}` : ""}): Redis restarted or failed over and may have lost writes. ` +
            "Once every tag's max id plus RAISE_BY is above every id handed out, lift it with `leaf store lift-fence RAISE_BY` (same configuration)",
          details: { key: "segment.redis.url", fence: state.fence.reason },
        });
      }
    } catch (error) {
      await store.close().catch(() => {});
      throw error;
    }
    return store;
  },
  // The namespace without the hosts: a failover to a replica is judged by the marks taken before.
  storeId: (settings) => `redis:${settings.keyPrefix}{${settings.namespace}}`,
  describe: (settings) => ({
    kind: "redis",
    mode: settings.waitReplicas > 0 ? `wait ${settings.waitReplicas}` : "",
    target: target(settings),
    shared: true,
  }),
  operations: [
    {
      name: "create-namespace",
      usage: "create-namespace",
      doc: "Creates the namespace's marker (once, for a new namespace; never after a data loss before the tags are restored).",
      async run(settings) {
        const store = build(settings);
        try {
          const created = await store.createNamespace();
          return created
            ? `created the Redis segment namespace ${target(settings)} (waitReplicas ${settings.waitReplicas})`
            : `the Redis segment namespace ${target(settings)} exists already: nothing changed`;
        } finally {
          await store.close();
        }
      },
    },
    {
      name: "lift-fence",
      usage: "lift-fence RAISE_BY",
      doc: "Raises every tag's max id by RAISE_BY, then serves the fenced namespace again.",
      async run(settings, value) {
        if (value === undefined || !/^[0-9]{1,19}$/.test(value)) {
          throw new LeafError({
            component: "server",
            code: ErrorCodes.INVALID_ARGUMENT,
            message: `lift-fence needs RAISE_BY, the ids by which every max id is raised first: an integer from 0 to 2^63 - 1, got ${JSON.stringify(value ?? "")}`,
            details: { key: "RAISE_BY", value },
          });
        }
        const store = build(settings);
        try {
          const outcome = await store.liftFence({ raiseBy: BigInt(value) });
          return outcome.lifted
            ? `lifted the fence of ${target(settings)} (${outcome.reason}): ${outcome.tagsRaised} tag(s) raised by ${value}`
            : `the namespace ${target(settings)} was not fenced: nothing changed`;
        } finally {
          await store.close();
        }
      },
    },
  ],
};
