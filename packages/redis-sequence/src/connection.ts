// The Redis side of a sequence: a client made from a URL (owned, closed with the sequence) or one
// the caller passed (borrowed), script calls by SHA with a reload after a restart, a time limit on
// every round trip, and the eviction-policy check.
import { ErrorCodes, LeafError } from "@leaf/core";
import {
  checkBackend,
  isRedisScriptClient,
  type LuaScript,
  planRedis,
  type RedisEvictionSettings,
  readRedisEviction,
  redisClusterDefaults,
  redisFailurePhrase,
  runRedisScript,
  withTimeLimit,
} from "@leaf/core/adapter";
import { Cluster, type ClusterOptions, Redis, type RedisOptions } from "ioredis";
import type { RedisClient, RedisUrl } from "./options";

export { TimeLimitError as RedisTimeoutError } from "@leaf/core/adapter";

const COMPONENT = "redis-sequence";

/** A connection to Redis or Redis Cluster. */
export class RedisLink {
  /** "single" for one Redis, "cluster" for Redis Cluster. */
  readonly topology: "single" | "cluster";
  /** Where Redis is, without any password, for logs and the state snapshot. */
  readonly description: string;
  /** True when the client was made here from a URL, and is closed by close(). */
  readonly owned: boolean;
  /** The ioredis client. */
  readonly client: Redis | Cluster;
  /** The last connection error ioredis reported on a client made here. */
  lastClientError: string | undefined;

  constructor(
    options: { url?: unknown; client?: unknown },
    redisOptions: RedisOptions | undefined,
    clusterOptions: ClusterOptions | undefined,
  ) {
    const backend = checkBackend<RedisClient, RedisUrl>(options, {
      component: COMPONENT,
      url: "a redis:// URL, or an array of Redis Cluster node URLs",
      isUrl: (value): value is RedisUrl =>
        (typeof value === "string" && value.length > 0) ||
        (Array.isArray(value) && value.every((v) => typeof v === "string")),
      client: {
        what: "an ioredis Redis or Cluster client",
        is: (value): value is RedisClient => isRedisScriptClient(value),
      },
      renamed: { redis: "url or client" },
    });
    if (backend.url === undefined) {
      this.client = backend.client;
      this.topology = (backend.client as { isCluster?: boolean }).isCluster ? "cluster" : "single";
      this.description = `${this.topology === "cluster" ? "cluster" : "redis"} (client passed in)`;
      this.owned = false;
    } else {
      const plan = planRedis(backend.url, COMPONENT);
      this.description = plan.description;
      this.topology = plan.kind;
      this.owned = true;
      this.client =
        plan.kind === "single"
          ? new Redis(plan.url, {
              lazyConnect: true,
              maxRetriesPerRequest: 1,
              retryStrategy: (times) => Math.min(50 * 2 ** Math.min(times, 6), 2000),
              ...redisOptions,
            })
          : new Cluster(plan.nodes, {
              ...redisClusterDefaults(),
              ...clusterOptions,
              redisOptions: {
                ...plan.auth,
                maxRetriesPerRequest: 1,
                ...clusterOptions?.redisOptions,
                ...redisOptions,
              },
            });
    }
    if (this.owned) {
      // Without a listener ioredis prints every connection error; keep the last for the state.
      this.client.on("error", (error: Error) => {
        this.lastClientError = error.message;
      });
    }
  }

  /** Connects a client made here (a passed-in client is used as it is). */
  async connect(timeoutMs: number): Promise<void> {
    if (!this.owned) return;
    const status = (this.client as { status?: string }).status;
    if (status !== "wait") return;
    await withTimeLimit(this.client.connect(), timeoutMs, "connecting");
  }

  /** Runs `script` by SHA, sending its source once when Redis does not know it (after a restart). */
  async run(
    script: LuaScript,
    keys: string[],
    args: (string | number)[],
    timeoutMs: number,
  ): Promise<unknown> {
    return withTimeLimit(
      runRedisScript(this.client, script, keys, args),
      timeoutMs,
      "waiting for Redis to answer",
    );
  }

  /**
   * `maxmemory-policy` and `maxmemory` of every master, read with CONFIG GET or else INFO memory
   * (core's readRedisEviction); a master that answers neither is given as unreadable.
   */
  async evictionSettings(timeoutMs: number): Promise<RedisEvictionSettings[]> {
    const nodes: Redis[] =
      this.client instanceof Cluster ? this.client.nodes("master") : [this.client as Redis];
    return Promise.all(nodes.map((node) => readRedisEviction(node, timeoutMs)));
  }

  /** Quits a client made here; a passed-in client is left open. */
  async close(): Promise<void> {
    if (!this.owned) return;
    try {
      await withTimeLimit(this.client.quit(), 1000, "closing");
    } catch {
      this.client.disconnect();
    }
  }
}

/** An UNAVAILABLE error for a failed round trip, naming where Redis is and what happened. */
export function unavailable(
  description: string,
  cause: unknown,
  what: string,
  details: Record<string, unknown> = {},
): LeafError {
  const reason = cause instanceof Error ? cause.message : String(cause);
  const corrupt = /WRONGTYPE|not an integer/.test(reason);
  return new LeafError({
    component: COMPONENT,
    code: corrupt ? ErrorCodes.CORRUPT_DATA : ErrorCodes.UNAVAILABLE,
    message: corrupt
      ? `${what}: a key of the namespace in ${description} holds data of another kind (${reason}); ` +
        "another program writes to these keys: give this sequence its own namespace or keyPrefix"
      : `${what}: Redis at ${description} ${redisFailurePhrase(reason)}. Cached ranges are used ` +
        "until they run out",
    details: { redis: description, reason, ...details },
    cause,
  });
}
