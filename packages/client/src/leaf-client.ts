// The client: options checked in the constructor (no I/O), one server pool shared by every tag's
// segment ids and the snowflake ids, and close() that drops every cache.
import { ClientErrorCodes, invalidArgument, LeafClientError } from "./errors";
import { type IdType, SegmentIds } from "./segment-ids";
import { type ServerHealth, ServerPool } from "./server-pool";
import { SnowflakeIds } from "./snowflake-ids";

/** Circuit breaker settings of every server. */
export interface BreakerOptions {
  /**
   * Consecutive failures (network error, timeout, 5xx) that open a server's breaker (default 3).
   */
  failures?: number;
  /** ms an opened breaker stays open before one trial request (default 1000). */
  openMs?: number;
  /** Longest open time: each failed trial doubles it up to this, ms (default 30 000). */
  maxOpenMs?: number;
}

/** Options of {@link LeafClient}. */
export interface LeafClientOptions {
  /** Base URLs of the Leaf servers (`http://host:port`), one or more. Load spreads over them. */
  servers: string | string[];
  /** Access token for every request (`Authorization: Bearer`); `tokens` overrides it per tag. */
  token?: string;
  /** Access tokens per segment tag (the server's `server.accessTokens`). */
  tokens?: Record<string, string>;
  /** Deadline of one call (and of one background refill), ms (default 5000). */
  timeoutMs?: number;
  /** Longest wait for one server's answer before the next server is asked, ms (default 1000). */
  requestTimeoutMs?: number;
  /** Rounds over the servers after the first, with jittered backoff between them (default 2). */
  retries?: number;
  /** First backoff between rounds, ms; doubles each round (default 50). */
  retryBaseMs?: number;
  /** Longest backoff between rounds, ms (default 1000). */
  retryMaxMs?: number;
  breaker?: BreakerOptions;
  /** Extra headers on every request. */
  headers?: Record<string, string>;
  /** The fetch to use (default: Node's global fetch). */
  fetch?: typeof fetch;
}

/** Options of {@link LeafClient.segment}. */
export interface SegmentOptions<T extends IdType = IdType> {
  /** "bigint" (default) or "string": ids as decimal strings. */
  ids?: T;
  /** Seconds of ids one range should last at the observed rate (default 5). */
  targetSeconds?: number;
  /** Smallest range asked for, also the first (default 100). */
  minRangeSize?: number;
  /** Largest range asked for (default 10,000,000): bounds the ids lost at a crash. */
  maxRangeSize?: number;
  /**
   * Refill when the ids left (current and fetched ranges) fall below this many range sizes, above 0
   * and at most 100 (default 0.5: Leaf's double buffer, the next range fetched when the current one
   * is half used). The cache then still lasts about `targetSeconds * refillThreshold` seconds when
   * a refill starts: that is how long the servers (or their database) may fail without a caller
   * noticing. Above 1, several ranges are kept in reserve (e.g. `targetSeconds: 0.5,
   * refillThreshold: 6`: a refill every half second, 3 seconds of ids in reserve).
   */
  refillThreshold?: number;
  /** Access token of this tag (default: `tokens[tag]`, then `token`). */
  token?: string;
}

/** Options of {@link LeafClient.snowflake}. */
export interface SnowflakeOptions<T extends IdType = IdType> {
  ids?: T;
  /** Ids per batch, 1 to the servers' `server.maxBatch` (default 1000). */
  batchSize?: number;
  /**
   * Ids are dropped unused this many ms after their batch was requested (default 1000): an id's
   * time part is never older than this when it is handed out.
   */
  maxAgeMs?: number;
  /** The snowflake key (selects the access token on the server). */
  key?: string;
  token?: string;
}

/**
 * Ids for Node services from a pool of Leaf servers, at memory speed: whole ranges of segment ids
 * and batches of snowflake ids are fetched and handed out locally.
 *
 * ```ts
 * const client = new LeafClient({ servers: ["http://leaf-1:8080", "http://leaf-2:8080"] });
 * const orders = client.segment("order");
 * await orders.start();             // first range; fails fast when no server answers
 * const id = orders.nextIdSync();   // bigint, no I/O
 * const next = await orders.nextId({ signal });
 * await client.close();
 * ```
 */
export class LeafClient {
  private readonly pool: ServerPool;
  private readonly options: Required<
    Pick<LeafClientOptions, "timeoutMs" | "retryBaseMs" | "retryMaxMs">
  > &
    Pick<LeafClientOptions, "token">;
  /**
   * `tokens` by tag, copied into a map: a tag named like an Object.prototype member (`constructor`,
   * `toString`) must not find that member as its token.
   */
  private readonly tokens: ReadonlyMap<string, string>;
  private readonly stop = new AbortController();
  private readonly segments = new Map<string, SegmentIds<bigint> | SegmentIds<string>>();
  private readonly snowflakes: Array<SnowflakeIds<bigint> | SnowflakeIds<string>> = [];
  private closed = false;

  constructor(options: LeafClientOptions) {
    if (options === null || typeof options !== "object") {
      throw invalidArgument("options", options, "an object with at least `servers`");
    }
    const servers = (
      typeof options.servers === "string" ? [options.servers] : options.servers
    ) as unknown;
    if (!Array.isArray(servers) || servers.length === 0) {
      throw invalidArgument(
        "servers",
        options.servers,
        'one or more base URLs, e.g. ["http://leaf-1:8080"]',
      );
    }
    const urls = servers.map((raw: unknown) => {
      let url: URL;
      try {
        url = new URL(String(raw));
      } catch {
        throw invalidArgument("servers", raw, "an http:// or https:// base URL");
      }
      if (
        (url.protocol !== "http:" && url.protocol !== "https:") ||
        typeof raw !== "string" ||
        // Checked on the text too: the URL parser drops an empty query or fragment ("...:8080?"),
        // but the request paths are appended to the text.
        /[?#]/.test(raw) ||
        url.username !== "" ||
        url.password !== ""
      ) {
        // A password is not repeated in the message.
        const shown =
          typeof raw === "string" && url.password !== ""
            ? raw.replace(`:${url.password}@`, ":***@")
            : raw;
        throw invalidArgument(
          "servers",
          shown,
          "an http:// or https:// base URL without a query, fragment or credentials (give credentials with `token` or `headers`)",
        );
      }
      return raw.replace(/\/+$/, "");
    });
    if (new Set(urls).size !== urls.length) {
      throw invalidArgument("servers", servers, "each server once");
    }
    const breaker = options.breaker ?? {};
    const timeoutMs = int("timeoutMs", options.timeoutMs, 5000, 1, 3_600_000);
    const retryBaseMs = int("retryBaseMs", options.retryBaseMs, 50, 1, 60_000);
    const retryMaxMs = int("retryMaxMs", options.retryMaxMs, 1000, retryBaseMs, 600_000);
    const openMs = int("breaker.openMs", breaker.openMs, 1000, 1, 600_000);
    this.pool = new ServerPool({
      servers: urls,
      requestTimeoutMs: int("requestTimeoutMs", options.requestTimeoutMs, 1000, 1, 3_600_000),
      retries: int("retries", options.retries, 2, 0, 100),
      retryBaseMs,
      retryMaxMs,
      breakerFailures: int("breaker.failures", breaker.failures, 3, 1, 1000),
      breakerOpenMs: openMs,
      breakerMaxOpenMs: int("breaker.maxOpenMs", breaker.maxOpenMs, 30_000, openMs, 3_600_000),
      fetch: checkFetch(options.fetch),
      headers: checkHeaders(options.headers),
    });
    if (
      options.token !== undefined &&
      (typeof options.token !== "string" || options.token === "")
    ) {
      throw invalidArgument("token", options.token, "a non-empty string");
    }
    if (options.tokens !== undefined) {
      if (options.tokens === null || typeof options.tokens !== "object") {
        throw invalidArgument("tokens", options.tokens, "an object of tag -> token");
      }
      for (const [tag, token] of Object.entries(options.tokens)) {
        if (typeof token !== "string" || token === "") {
          throw invalidArgument(`tokens[${JSON.stringify(tag)}]`, token, "a non-empty string");
        }
      }
    }
    this.options = {
      timeoutMs,
      retryBaseMs,
      retryMaxMs,
      token: options.token,
    };
    this.tokens = new Map(Object.entries(options.tokens ?? {}));
  }

  /**
   * The segment ids of `tag`: one cache per tag and client (a second call with the same tag returns
   * the same object; its options must then be left out or equal).
   */
  segment(tag: string, options?: SegmentOptions<"bigint">): SegmentIds<bigint>;
  segment(tag: string, options: SegmentOptions<"string">): SegmentIds<string>;
  segment(tag: string, options: SegmentOptions = {}): SegmentIds<bigint> | SegmentIds<string> {
    this.checkOpen();
    if (!isTag(tag)) {
      throw invalidArgument(
        "tag",
        tag,
        'a string of 1 to 128 characters without control characters, other than "." and ".." (which a URL path drops)',
      );
    }
    const existing = this.segments.get(tag);
    if (existing !== undefined) {
      if (Object.keys(options).length > 0) {
        throw invalidArgument(
          "options",
          options,
          `none: the ids of tag ${JSON.stringify(tag)} exist already in this client (options are given at the first segment() call)`,
        );
      }
      return existing;
    }
    const ids = checkIdType("ids", options.ids);
    const minRangeSize = int("minRangeSize", options.minRangeSize, 100, 1, 2_147_483_647);
    const source = new SegmentIds(
      this.pool,
      {
        tag,
        token: checkToken("token", options.token) ?? this.tokens.get(tag) ?? this.options.token,
        strings: ids === "string",
        targetSeconds: positive("targetSeconds", options.targetSeconds, 5, 3600),
        minRangeSize,
        maxRangeSize: int(
          "maxRangeSize",
          options.maxRangeSize,
          Math.max(10_000_000, minRangeSize),
          minRangeSize,
          2_147_483_647,
        ),
        refillThreshold: positive("refillThreshold", options.refillThreshold, 0.5, 100),
        timeoutMs: this.options.timeoutMs,
        retryBaseMs: this.options.retryBaseMs,
        retryMaxMs: this.options.retryMaxMs,
      },
      this.stop.signal,
    );
    this.segments.set(tag, source as SegmentIds<bigint>);
    return source as SegmentIds<bigint>;
  }

  /** Snowflake ids from prefetched batches: a new cache per call. */
  snowflake(options?: SnowflakeOptions<"bigint">): SnowflakeIds<bigint>;
  snowflake(options: SnowflakeOptions<"string">): SnowflakeIds<string>;
  snowflake(options: SnowflakeOptions = {}): SnowflakeIds<bigint> | SnowflakeIds<string> {
    this.checkOpen();
    const ids = checkIdType("ids", options.ids);
    if (options.key !== undefined && !isTag(options.key)) {
      throw invalidArgument(
        "key",
        options.key,
        "a string of 1 to 128 characters without control characters",
      );
    }
    const source = new SnowflakeIds(
      this.pool,
      {
        batchSize: int("batchSize", options.batchSize, 1000, 1, 1_000_000),
        maxAgeMs: int("maxAgeMs", options.maxAgeMs, 1000, 1, 86_400_000),
        key: options.key,
        token: checkToken("token", options.token) ?? this.options.token,
        strings: ids === "string",
        timeoutMs: this.options.timeoutMs,
      },
      this.stop.signal,
    );
    this.snowflakes.push(source as SnowflakeIds<bigint>);
    return source as SnowflakeIds<bigint>;
  }

  /** Health and breaker state of every server. */
  servers(): ServerHealth[] {
    return this.pool.health();
  }

  /** Drops every cache (those ids are never handed out), aborts requests in flight. Idempotent. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.stop.abort();
    for (const s of this.segments.values()) s.close();
    for (const s of this.snowflakes) s.close();
  }

  private checkOpen(): void {
    if (this.closed) {
      throw new LeafClientError({
        code: ClientErrorCodes.CLOSED,
        message: "the client is closed (close() was called); build a new LeafClient",
      });
    }
  }
}

/** A tag or key as the server takes it: 1 to 128 characters, no control characters. */
function isTag(value: unknown): value is string {
  return (
    typeof value === "string" &&
    value.length > 0 &&
    value !== "." &&
    value !== ".." &&
    [...value].length <= 128 &&
    // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are refused
    !/[\u0000-\u001f\u007f]/.test(value)
  );
}

function int(name: string, value: unknown, fallback: number, min: number, max: number): number {
  if (value === undefined) return fallback;
  if (typeof value !== "number" || !Number.isInteger(value) || value < min || value > max) {
    throw invalidArgument(name, value, `an integer from ${min} to ${max}`);
  }
  return value;
}

function positive(name: string, value: unknown, fallback: number, max: number): number {
  if (value === undefined) return fallback;
  if (typeof value !== "number" || !Number.isFinite(value) || value <= 0 || value > max) {
    throw invalidArgument(name, value, `a number above 0, at most ${max}`);
  }
  return value;
}

function checkIdType(name: string, value: unknown): IdType {
  if (value === undefined || value === "bigint") return "bigint";
  if (value === "string") return "string";
  throw invalidArgument(name, value, '"bigint" or "string"');
}

function checkToken(name: string, value: unknown): string | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== "string" || value === "")
    throw invalidArgument(name, value, "a non-empty string");
  return value;
}

function checkFetch(value: unknown): typeof fetch {
  if (value === undefined) return globalThis.fetch;
  if (typeof value !== "function") throw invalidArgument("fetch", value, "a fetch function");
  return value as typeof fetch;
}

function checkHeaders(value: unknown): Record<string, string> {
  if (value === undefined) return {};
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    throw invalidArgument("headers", value, "an object of header name -> string value");
  }
  for (const [name, v] of Object.entries(value)) {
    if (typeof v !== "string")
      throw invalidArgument(`headers[${JSON.stringify(name)}]`, v, "a string");
  }
  return { ...(value as Record<string, string>) };
}
