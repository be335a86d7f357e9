// One connection to Redis for every Redis adapter (the registry, the sequence): an ioredis client
// made from a URL (owned: closed with the adapter) or one the caller passed (borrowed: left open),
// scripts run by SHA with a reload after a restart, and a time limit on every round trip. Errors
// pass through: each adapter says what a failure means in its words (redisCallError).
import { checkBackend } from "@leaf/core/adapter";
import { Cluster, type ClusterOptions, Redis, type RedisOptions } from "ioredis";
import { type RedisEvictionSettings, readRedisEviction } from "./redis-eviction";
import {
  isRedisScriptClient,
  type LuaScript,
  planRedis,
  redisClusterDefaults,
  runRedisScript,
  withTimeLimit,
} from "./redis-link";

/** Options of {@link RedisLink}. Give exactly one of `url` and `client`. */
export interface RedisLinkOptions {
  /** The adapter's name in error messages ("registry-redis"). */
  component: string;
  /** A redis:// or rediss:// URL, or an array of Redis Cluster node URLs. */
  url?: unknown;
  /** An ioredis Redis (also one managed by Sentinel) or Cluster client, left open by close(). */
  client?: unknown;
  /** ioredis options for a client made from `url` (each node's, for a Cluster). */
  redisOptions?: RedisOptions | undefined;
  /** ioredis Cluster options for a Cluster client made from node URLs. */
  clusterOptions?: ClusterOptions | undefined;
  /** Time limit of connecting and of each round trip when a call gives none, in ms. */
  timeoutMs: number;
}

/** One connection to Redis (single, Sentinel-managed or Cluster). Makes no I/O until used. */
export class RedisLink {
  /** "single" for one Redis (also one managed by Sentinel), "cluster" for Redis Cluster. */
  readonly topology: "single" | "cluster";
  /** Where Redis is, without any password, for messages. */
  readonly description: string;
  /** True when the client was made here from `url`, and is closed by close(). */
  readonly owned: boolean;
  /** The ioredis client. */
  readonly client: Redis | Cluster;
  /** The last connection error ioredis reported on a client made here. */
  lastClientError: string | undefined;
  private readonly timeoutMs: number;

  constructor(options: RedisLinkOptions) {
    this.timeoutMs = options.timeoutMs;
    const backend = checkBackend<Redis | Cluster, string | readonly string[]>(options, {
      component: options.component,
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
      this.topology = (backend.client as { isCluster?: boolean }).isCluster ? "cluster" : "single";
      this.owned = false;
      this.description = `${this.topology === "cluster" ? "cluster" : "redis"} (client passed in)`;
      return;
    }
    const common = {
      lazyConnect: true,
      maxRetriesPerRequest: 1,
      connectTimeout: this.timeoutMs,
      retryStrategy: (times: number) => Math.min(50 * 2 ** Math.min(times, 6), 1000),
    };
    const plan = planRedis(backend.url, options.component);
    this.description = plan.description;
    this.topology = plan.kind;
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
   * Connects a client made here that has not connected yet, within `timeoutMs` (a passed-in client
   * is used as it is). Rejects with the client's error or a TimeLimitError.
   */
  async connect(timeoutMs: number = this.timeoutMs): Promise<void> {
    const status = (this.client as { status?: string }).status;
    if (!this.owned || status !== "wait") return;
    await withTimeLimit(this.client.connect(), timeoutMs, "waiting for Redis to answer");
  }

  /**
   * Runs `script` by SHA (its source once when Redis does not know it, as after a restart),
   * connecting first if needed, all within `timeoutMs`. Rejects with Redis's error or a
   * TimeLimitError.
   */
  async run(
    script: LuaScript,
    keys: readonly string[],
    args: readonly (string | number)[],
    timeoutMs: number = this.timeoutMs,
  ): Promise<unknown> {
    const call = async () => {
      await this.connect(timeoutMs);
      return await runRedisScript(this.client, script, keys, args);
    };
    return await withTimeLimit(call(), timeoutMs, "waiting for Redis to answer");
  }

  /**
   * Runs `script` and then `WAIT replicas waitMs` in one pipeline, on one connection, so that the
   * WAIT covers the script's writes (a WAIT sent alone could go out on a new connection after a
   * reconnect, which has written nothing, and answer at once). Answers the script's reply and how
   * many replicas acknowledged every write made on the connection so far. Rejects with the
   * script's error (its writes, if any, are not waited for), Redis's error for the WAIT, or a
   * TimeLimitError; `timeoutMs` must leave room for `waitMs`.
   */
  async runThenWait(
    script: LuaScript,
    keys: readonly string[],
    args: readonly (string | number)[],
    wait: { replicas: number; waitMs: number },
    timeoutMs: number = this.timeoutMs,
  ): Promise<{ reply: unknown; acknowledged: number }> {
    const send = async (bySource: boolean) => {
      const pipeline = this.client.pipeline();
      if (bySource) pipeline.eval(script.source, keys.length, ...keys, ...args);
      else pipeline.evalsha(script.sha, keys.length, ...keys, ...args);
      pipeline.wait(wait.replicas, wait.waitMs);
      return (await pipeline.exec()) ?? [];
    };
    const call = async () => {
      await this.connect(timeoutMs);
      let results = await send(false);
      const first = results[0]?.[0];
      if (first instanceof Error && first.message.startsWith("NOSCRIPT"))
        results = await send(true);
      const [scriptError, reply] = results[0] ?? [new Error("the pipeline answered nothing")];
      if (scriptError) throw scriptError;
      const [waitError, acknowledged] = results[1] ?? [new Error("WAIT was not answered")];
      if (waitError) throw waitError;
      return { reply, acknowledged: Number(acknowledged) };
    };
    return await withTimeLimit(call(), timeoutMs, "waiting for Redis and its replicas to answer");
  }

  /**
   * `maxmemory-policy` and `maxmemory` of every server that may hold the keys (each master of a
   * Cluster), read with CONFIG GET or else INFO memory. Rejects only when a client made here
   * cannot connect; a server that answers neither read is given as unreadable.
   */
  async evictionSettings(timeoutMs: number = this.timeoutMs): Promise<RedisEvictionSettings[]> {
    await this.connect(timeoutMs);
    let servers: Redis[] = [this.client as Redis];
    if (this.client instanceof Cluster) {
      servers = this.client.nodes("master");
      if (servers.length === 0) return [unreadable("no Cluster master known yet")];
    }
    return Promise.all(servers.map((server) => readRedisEviction(server, timeoutMs)));
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

function unreadable(why: string): RedisEvictionSettings {
  return { policy: undefined, maxmemory: undefined, source: undefined, unreadable: why };
}
