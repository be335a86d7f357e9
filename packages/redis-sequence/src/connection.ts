// The Redis side of a sequence: a client made from a URL (owned, closed with the sequence) or one
// the caller passed (borrowed), script calls by SHA with a reload after a restart, a time limit on
// every round trip, and the eviction-policy check.
import { configError, ErrorCodes, LeafError } from "@leaf/core";
import { checkBackend } from "@leaf/core/adapter";
import { Cluster, type ClusterOptions, Redis, type RedisOptions } from "ioredis";
import type { LuaScript } from "./lua-scripts";
import type { RedisClient, RedisUrl } from "./options";

const COMPONENT = "redis-sequence";

/** The few commands a sequence sends; both ioredis `Redis` and `Cluster` have them. */
interface ScriptClient {
  evalsha(sha: string, numKeys: number, ...args: (string | number)[]): Promise<unknown>;
  eval(source: string, numKeys: number, ...args: (string | number)[]): Promise<unknown>;
}

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
      client: { what: "an ioredis Redis or Cluster client", is: isClient },
      renamed: { redis: "url or client" },
    });
    const connection = backend.url;
    if (connection === undefined) {
      this.client = backend.client;
      this.topology = (backend.client as { isCluster?: boolean }).isCluster ? "cluster" : "single";
      this.description = `${this.topology === "cluster" ? "cluster" : "redis"} (client passed in)`;
      this.owned = false;
    } else if (typeof connection === "string") {
      const url = parseUrl(connection, "url");
      this.client = new Redis(connection, {
        lazyConnect: true,
        maxRetriesPerRequest: 1,
        retryStrategy: (times) => Math.min(50 * 2 ** Math.min(times, 6), 2000),
        ...redisOptions,
      });
      this.topology = "single";
      this.description = describeUrl(url);
      this.owned = true;
    } else {
      if (connection.length === 0) {
        throw configError(COMPONENT, "url", connection, "at least one Redis Cluster node URL");
      }
      const urls = connection.map((c, i) => parseUrl(c, `url[${i}]`));
      const first = urls[0]!;
      this.client = new Cluster(
        urls.map((u) => ({
          host: u.hostname.replace(/^\[|\]$/g, ""),
          port: Number(u.port || 6379),
        })),
        {
          lazyConnect: true,
          maxRedirections: 16,
          ...clusterOptions,
          redisOptions: {
            username: first.username ? decodeURIComponent(first.username) : undefined,
            password: first.password ? decodeURIComponent(first.password) : undefined,
            tls: first.protocol === "rediss:" ? {} : undefined,
            maxRetriesPerRequest: 1,
            ...clusterOptions?.redisOptions,
            ...redisOptions,
          },
        },
      );
      this.topology = "cluster";
      this.description = `cluster ${urls.map(describeUrl).join(",")}`;
      this.owned = true;
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
    await withTimeout(this.client.connect(), timeoutMs, "connecting");
  }

  /** Runs `script` by SHA, sending its source once when Redis does not know it (after a restart). */
  async run(
    script: LuaScript,
    keys: string[],
    args: (string | number)[],
    timeoutMs: number,
  ): Promise<unknown> {
    const client = this.client as unknown as ScriptClient;
    const call = async () => {
      try {
        return await client.evalsha(script.sha, keys.length, ...keys, ...args);
      } catch (error) {
        if (error instanceof Error && error.message.startsWith("NOSCRIPT")) {
          return await client.eval(script.source, keys.length, ...keys, ...args);
        }
        throw error;
      }
    };
    return withTimeout(call(), timeoutMs, "waiting for Redis to answer");
  }

  /**
   * The maxmemory-policy of every master, or undefined when Redis refuses CONFIG (managed
   * services often do). Anything but "noeviction" may evict a counter and repeat its sequences.
   */
  async evictionPolicies(timeoutMs: number): Promise<string[] | undefined> {
    const nodes: Redis[] =
      this.client instanceof Cluster ? this.client.nodes("master") : [this.client as Redis];
    try {
      const answers = await withTimeout(
        Promise.all(nodes.map((n) => n.config("GET", "maxmemory-policy") as Promise<unknown>)),
        timeoutMs,
        "reading maxmemory-policy",
      );
      return answers.map((a) => (Array.isArray(a) ? String(a[1]) : "unknown"));
    } catch {
      return undefined;
    }
  }

  /** Quits a client made here; a passed-in client is left open. */
  async close(): Promise<void> {
    if (!this.owned) return;
    try {
      await withTimeout(this.client.quit(), 1000, "closing");
    } catch {
      this.client.disconnect();
    }
  }
}

function isClient(value: unknown): value is Redis | Cluster {
  const candidate = value as Partial<ScriptClient> | null;
  return (
    typeof candidate === "object" &&
    candidate !== null &&
    typeof candidate.evalsha === "function" &&
    typeof candidate.eval === "function"
  );
}

function parseUrl(value: unknown, key: string): URL {
  let url: URL | undefined;
  if (typeof value === "string") {
    try {
      url = new URL(value);
    } catch {
      url = undefined;
    }
  }
  if (!url || (url.protocol !== "redis:" && url.protocol !== "rediss:") || !url.hostname) {
    const shown = typeof value === "string" ? value.replace(/\/\/[^@/]*@/, "//***@") : value;
    throw configError(
      COMPONENT,
      key,
      shown,
      'a Redis URL such as "redis://127.0.0.1:6379" or "rediss://user:password@host:6380/0"',
    );
  }
  return url;
}

function describeUrl(url: URL): string {
  const auth = url.username || url.password ? "***@" : "";
  return `${url.protocol}//${auth}${url.host}${url.pathname === "/" ? "" : url.pathname}`;
}

/** Marks a failure to reach Redis in time. */
export class RedisTimeoutError extends Error {
  constructor(what: string, ms: number) {
    super(`no answer after ${ms} ms ${what}`);
    this.name = "RedisTimeoutError";
  }
}

/** Rejects with a RedisTimeoutError when `promise` takes longer than `ms`. */
export function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(new RedisTimeoutError(what, ms)), ms);
    promise.then(
      (value) => {
        clearTimeout(timer);
        resolve(value);
      },
      (error: unknown) => {
        clearTimeout(timer);
        reject(error);
      },
    );
  });
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
      : `${what}: Redis at ${description} did not answer (${reason}); check that it runs and is ` +
        "reachable. Cached ranges are used until they run out",
    details: { redis: description, reason, ...details },
    cause,
  });
}
