// Snowflake ids on the client: batches prefetched from the servers (`/api/v1/snowflake/ids`) and
// handed out locally, dropped once older than `maxAgeMs` so that an id's time part stays recent.
import { performance } from "node:perf_hooks";
import { ClientErrorCodes, LeafClientError } from "./errors";
import type { CallOptions } from "./segment-ids";
import type { ServerPool } from "./server-pool";

const DIGITS = /^[0-9]{1,19}$/;

/** Settings of a {@link SnowflakeIds}, checked by the client. */
export interface SnowflakeSettings {
  batchSize: number;
  maxAgeMs: number;
  key: string | undefined;
  token: string | undefined;
  strings: boolean;
  timeoutMs: number;
}

interface Batch {
  ids: bigint[];
  /** performance.now() when the request was sent: every id of the batch was made after it. */
  fetchedAt: number;
}

/**
 * Snowflake ids from prefetched batches. An id's time part is the moment the server made it, so an
 * id handed out `a` ms after its batch was requested carries a time up to `a` ms old: ids are never
 * handed out more than `maxAgeMs` after their request (older ones are dropped, a gap), so the time
 * part of every id is at most `maxAgeMs` (plus the clock offset between server and client) behind
 * the moment it is handed out. Ids are unique across servers (each holds its own worker id); they
 * increase within a batch, not across batches of different servers.
 */
export class SnowflakeIds<Id extends bigint | string = bigint> {
  private ids: bigint[] = [];
  private index = 0;
  private fetchedAt = 0;
  private next: Batch | undefined;
  private filling: Promise<void> | undefined;
  private lastError: LeafClientError | undefined;
  private closed = false;
  private dropped = 0;

  /** @internal Built by `LeafClient.snowflake()`. */
  constructor(
    private readonly pool: ServerPool,
    private readonly settings: SnowflakeSettings,
    private readonly stop: AbortSignal,
  ) {}

  /** Fetches the first batch; call it before `nextIdSync()` (`nextId()` does not need it). */
  async start(): Promise<void> {
    if (this.closed) throw this.closedError();
    if (this.usable() > 0) return;
    await this.refill();
    if (this.closed) throw this.closedError();
    if (this.lastError && this.usable() === 0) throw this.lastError;
  }

  /**
   * The next id from the prefetched batch: no I/O. Throws CACHE_EMPTY when no batch younger than
   * `maxAgeMs` holds ids (a refill is started), CLOSED after `close()`.
   */
  nextIdSync(): Id {
    const id = this.take();
    if (id !== undefined) return id;
    if (this.closed) throw this.closedError();
    void this.refill();
    throw new LeafClientError({
      code: ClientErrorCodes.CACHE_EMPTY,
      message:
        "no snowflake id younger than maxAgeMs in the local cache" +
        (this.lastError
          ? ` (the last fetch failed: ${this.lastError.message.replace(/^\[leaf\] \[client\] /, "")})`
          : "") +
        "; use nextId(), which waits for a batch",
      leafCode: this.lastError?.leafCode,
      cause: this.lastError,
    });
  }

  /** The next id; waits for a batch when the cache is empty. Errors as `SegmentIds.nextId`. */
  async nextId(options?: CallOptions): Promise<Id> {
    const deadline = performance.now() + (options?.timeoutMs ?? this.settings.timeoutMs);
    for (;;) {
      const id = this.take();
      if (id !== undefined) return id;
      if (this.closed) throw this.closedError();
      if (options?.signal?.aborted) throw abortedError(options.signal);
      const left = deadline - performance.now();
      if (left <= 0) {
        throw new LeafClientError({
          code: ClientErrorCodes.TIMEOUT,
          message: "no snowflake id before the call's deadline",
          cause: this.lastError,
          leafCode: this.lastError?.leafCode,
        });
      }
      const failed = await race(this.refill(), left, options?.signal);
      // A fetch that close() stopped fails as ABORTED: the caller is told CLOSED, as segment ids do.
      if (this.closed) throw this.closedError();
      if (failed && this.usable() === 0 && this.lastError) throw this.lastError;
    }
  }

  /** Ids dropped unused because they grew older than `maxAgeMs`. */
  get droppedIds(): number {
    return this.dropped;
  }

  /** Drops the cache and stops prefetching. Idempotent. */
  close(): void {
    this.closed = true;
    this.ids = [];
    this.index = 0;
    this.next = undefined;
  }

  private take(): Id | undefined {
    for (;;) {
      const now = performance.now();
      if (this.index < this.ids.length) {
        if (now - this.fetchedAt < this.settings.maxAgeMs) {
          const id = this.ids[this.index++]!;
          // Half used: fetch the next batch in the background.
          if (this.index === this.ids.length >> 1 && this.next === undefined) void this.refill();
          return (this.strings() ? id.toString() : id) as Id;
        }
        this.dropped += this.ids.length - this.index;
        this.index = this.ids.length;
      }
      const next = this.next;
      if (next === undefined) return undefined;
      this.next = undefined;
      this.ids = next.ids;
      this.index = 0;
      this.fetchedAt = next.fetchedAt;
      if (now - next.fetchedAt >= this.settings.maxAgeMs) {
        this.dropped += next.ids.length;
        this.ids = [];
      } else if (next.ids.length > 0 && this.filling === undefined) {
        void this.refill();
      }
    }
  }

  private strings(): boolean {
    return this.settings.strings;
  }

  /** Ids usable now (not aged out). */
  private usable(): number {
    const now = performance.now();
    let n = now - this.fetchedAt < this.settings.maxAgeMs ? this.ids.length - this.index : 0;
    if (this.next && now - this.next.fetchedAt < this.settings.maxAgeMs) n += this.next.ids.length;
    return n;
  }

  /** Fetches one batch into `next` unless a fetch runs; resolves true when it failed. */
  private refill(): Promise<boolean> {
    if (this.closed) return Promise.resolve(false);
    this.filling ??= this.fetchBatch().finally(() => {
      this.filling = undefined;
    });
    return this.filling.then(
      () => false,
      () => true,
    );
  }

  private async fetchBatch(): Promise<void> {
    const fetchedAt = performance.now();
    const { batchSize, key } = this.settings;
    const query = `count=${batchSize}${key === undefined ? "" : `&key=${encodeURIComponent(key)}`}`;
    try {
      const ids = await this.pool.request({
        path: `/api/v1/snowflake/ids?${query}`,
        token: this.settings.token,
        deadline: fetchedAt + this.settings.timeoutMs,
        signal: this.stop,
        parse: (body, server) => parseIds(body, batchSize, server),
      });
      if (this.closed) return;
      this.next = { ids, fetchedAt };
      this.lastError = undefined;
    } catch (error) {
      this.lastError =
        error instanceof LeafClientError
          ? error
          : new LeafClientError({
              code: ClientErrorCodes.UNAVAILABLE,
              message: String(error),
              cause: error,
            });
      throw error;
    }
  }

  private closedError(): LeafClientError {
    return new LeafClientError({
      code: ClientErrorCodes.CLOSED,
      message: "the snowflake ids are closed (client.close() or snowflake close())",
    });
  }
}

function abortedError(signal: AbortSignal): LeafClientError {
  return new LeafClientError({
    code: ClientErrorCodes.ABORTED,
    message: "the call was aborted by its AbortSignal",
    cause: signal.reason,
  });
}

/** Resolves with `work`'s result, or false after `ms`; rejects with ABORTED when `signal` fires. */
function race(
  work: Promise<boolean>,
  ms: number,
  signal: AbortSignal | undefined,
): Promise<boolean> {
  return new Promise<boolean>((resolve, reject) => {
    const onAbort = () => {
      clearTimeout(timer);
      reject(abortedError(signal!));
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve(false);
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
    void work.then((failed) => {
      clearTimeout(timer);
      signal?.removeEventListener("abort", onAbort);
      resolve(failed);
    });
  });
}

/** A batch answer checked: `count` decimal-string ids, increasing. */
function parseIds(body: unknown, asked: number, server: string): bigint[] {
  const b = body as { ids?: unknown };
  const bad = (why: string) =>
    new LeafClientError({
      code: ClientErrorCodes.BAD_RESPONSE,
      message: `${server} answered a snowflake batch with ${why}`,
      server,
      status: 200,
    });
  if (b === null || typeof b !== "object" || !Array.isArray(b.ids)) throw bad("no ids array");
  if (b.ids.length !== asked) throw bad(`${b.ids.length} ids (${asked} asked for)`);
  const ids = new Array<bigint>(b.ids.length);
  let previous = -1n;
  for (let i = 0; i < b.ids.length; i++) {
    const raw = b.ids[i];
    if (typeof raw !== "string" || !DIGITS.test(raw)) throw bad(`a non-decimal id at ${i}`);
    const id = BigInt(raw);
    if (id <= previous) throw bad(`ids out of order at ${i}`);
    ids[i] = id;
    previous = id;
  }
  return ids;
}
