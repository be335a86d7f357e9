// The registry's side of Redis: a client made from a URL (owned: closed with the registry) or one the
// caller passed (borrowed: left open), scripts run by SHA with a reload after a restart, a time limit
// on every round trip, and failures turned into UNAVAILABLE errors naming where Redis is.
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

export const COMPONENT = "registry-redis";

/** Where Redis is, as the options give it. */
export interface RedisLinkOptions {
  url?: unknown;
  client?: unknown;
  redisOptions: RedisOptions | undefined;
  clusterOptions: ClusterOptions | undefined;
  timeoutMs: number;
}

/** One connection to Redis (single, Sentinel-managed or Cluster). Makes no I/O until used. */
export class RedisLink {
  /** Where Redis is, without any password, for messages. */
  readonly description: string;
  /** True when the client was made here from `url`, and is closed by close(). */
  readonly owned: boolean;
  readonly client: Redis | Cluster;
  private readonly timeoutMs: number;
  /** The last connection error ioredis reported on a client made here. */
  lastClientError: string | undefined;

  constructor(options: RedisLinkOptions) {
    this.timeoutMs = options.timeoutMs;
    const backend = checkBackend<Redis | Cluster, string | readonly string[]>(options, {
      component: COMPONENT,
      url: 'a Redis URL such as "redis://127.0.0.1:6379", or an array of Redis Cluster node URLs',
      isUrl: (value): value is string | readonly string[] =>
        (typeof value === "string" && value.length > 0) ||
        (Array.isArray(value) && value.every((v) => typeof v === "string")),
      client: {
        what: "an ioredis Redis (also one managed by Sentinel) or Cluster client",
        is: (value): value is Redis | Cluster => isRedisScriptClient(value),
      },
    });
    if (backend.url === undefined) {
      this.client = backend.client;
      this.owned = false;
      this.description = `${(backend.client as { isCluster?: boolean }).isCluster ? "cluster" : "redis"} (client passed in)`;
      return;
    }
    const common = {
      lazyConnect: true,
      maxRetriesPerRequest: 1,
      connectTimeout: this.timeoutMs,
      retryStrategy: (times: number) => Math.min(50 * 2 ** Math.min(times, 6), 1000),
    };
    const plan = planRedis(backend.url, COMPONENT);
    this.description = plan.description;
    this.client =
      plan.kind === "single"
        ? new Redis(plan.url, { ...common, ...options.redisOptions })
        : new Cluster(plan.nodes, {
            ...redisClusterDefaults(),
            ...options.clusterOptions,
            redisOptions: {
              ...plan.auth,
              ...common,
              ...options.clusterOptions?.redisOptions,
              ...options.redisOptions,
            },
          });
    this.owned = true;
    // Without a listener ioredis prints every connection error; keep the last one for messages.
    this.client.on("error", (error: Error) => {
      this.lastClientError = error.message;
    });
  }

  /**
   * Runs `script` by SHA (its source once when Redis does not know it, as after a restart) within
   * the time limit. Rejects with UNAVAILABLE naming `what`, or CORRUPT_DATA when a key holds data
   * of another kind.
   */
  async run(
    script: LuaScript,
    keys: readonly string[],
    args: readonly (string | number)[],
    what: string,
  ): Promise<unknown> {
    const call = async () => {
      const status = (this.client as { status?: string }).status;
      if (this.owned && status === "wait") await this.client.connect();
      return await runRedisScript(this.client, script, keys, args);
    };
    try {
      return await withTimeLimit(call(), this.timeoutMs, "waiting for Redis to answer");
    } catch (error) {
      throw this.failure(error, what);
    }
  }

  /**
   * `maxmemory-policy` and `maxmemory` of every server that may hold the keys (each master of a
   * Cluster), read with CONFIG GET or else INFO memory. Rejects with UNAVAILABLE only when a client
   * made here cannot connect; a server that answers neither read is given as unreadable.
   */
  async evictionSettings(): Promise<RedisEvictionSettings[]> {
    const status = (this.client as { status?: string }).status;
    if (this.owned && status === "wait") {
      try {
        await withTimeLimit(this.client.connect(), this.timeoutMs, "waiting for Redis to answer");
      } catch (error) {
        throw this.failure(error, "reading maxmemory-policy");
      }
    }
    let servers: Redis[] = [this.client as Redis];
    if (this.client instanceof Cluster) {
      servers = this.client.nodes("master");
      if (servers.length === 0) return [unreadable("no Cluster master known yet")];
    }
    return Promise.all(servers.map((server) => readRedisEviction(server, this.timeoutMs)));
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

  private failure(cause: unknown, what: string): LeafError {
    const reason = cause instanceof Error ? cause.message : String(cause);
    if (/WRONGTYPE|Expected value|cjson|attempt to/.test(reason)) {
      return new LeafError({
        component: COMPONENT,
        code: ErrorCodes.CORRUPT_DATA,
        message:
          `${what}: a key of the registry in ${this.description} holds data of another kind ` +
          `(${reason}); another program writes to these keys: give the registry its own keyPrefix`,
        details: { redis: this.description, reason },
        cause,
      });
    }
    // A refusal (Redis answered; nothing was changed) and no answer are both UNAVAILABLE: the
    // caller retries either way. The message says which.
    return new LeafError({
      component: COMPONENT,
      code: ErrorCodes.UNAVAILABLE,
      message: `${what}: Redis at ${this.description} ${redisFailurePhrase(reason, this.lastClientError)}`,
      details: { redis: this.description, reason },
      cause,
    });
  }
}

function unreadable(why: string): RedisEvictionSettings {
  return { policy: undefined, maxmemory: undefined, source: undefined, unreadable: why };
}
