// One tag's ids on the client: ranges taken from the servers (`/api/v1/segment/:tag/range`) and
// handed out locally. A range counter is a JS number while the range ends at or below 2^53 (one add
// and one BigInt() per id) and a bigint above, so every id stays exact. The range request and its
// checks (range-fetch.ts) and the adaptive range size (range-sizing.ts) are apart.
import { performance } from "node:perf_hooks";
import { ClientErrorCodes, LeafClientError } from "./errors";
import { fetchRange, MAX_ASK, type Range } from "./range-fetch";
import { RangeSizer } from "./range-sizing";
import type { ServerPool } from "./server-pool";

/** Ranges that end at or below this are counted with JS numbers. */
const NUMBER_LIMIT = 2n ** 53n;
/** Requests one refill makes at most when the servers cut its ranges short. */
const MAX_FETCHES = 16;

/** The kind of id a source hands out: `bigint` (default) or decimal strings. */
export type IdType = "bigint" | "string";

/** Per-call options of `nextId()`. */
export interface CallOptions {
  /** Fails with ABORTED when it fires. The refill shared with other callers goes on. */
  signal?: AbortSignal;
  /** This call's deadline in ms (default: the client's `timeoutMs`). */
  timeoutMs?: number;
}

/** Settings of a {@link SegmentIds}, checked by the client. */
export interface SegmentSettings {
  tag: string;
  token: string | undefined;
  strings: boolean;
  targetSeconds: number;
  minRangeSize: number;
  maxRangeSize: number;
  refillThreshold: number;
  timeoutMs: number;
  /** Backoff of a background refill that failed while ids were left, ms. */
  retryBaseMs: number;
  retryMaxMs: number;
}

/** What {@link SegmentIds.stats} shows. */
export interface SegmentStats {
  tag: string;
  /** Ids left in the local cache (current and fetched ranges). */
  idsLeft: bigint;
  /** Ids handed out so far. */
  handedOut: bigint;
  /** Ranges fetched so far. */
  ranges: number;
  /** The size the next refill asks for (adapts to the observed rate). */
  rangeSize: number;
  /** Observed rate, ids per second (moving average over refills). */
  idsPerSecond: number;
  /** A refill is in flight. */
  refilling: boolean;
  /** The last refill's failure, or null after a success. */
  lastError: string | null;
}

/**
 * Ids of one tag from a local cache of ranges, refilled in the background before it runs dry.
 * Get one from `LeafClient.segment(tag)`.
 *
 * Ids are unique across every client and server sharing the servers' store; they increase within a
 * range, not across ranges (two servers hand out ranges of different segments). Ids left in the
 * cache at `close()` or a crash are never handed out: a gap, as Leaf's own.
 */
export class SegmentIds<Id extends bigint | string = bigint> {
  // The current range, number mode. Hot fields first; `limit` is 0 when empty or counted in bigint.
  private value = 0;
  private limit = 0;
  /** The value at which a refill starts (Infinity when none is due in this range). */
  private refillAt = Number.POSITIVE_INFINITY;
  private readonly strings: boolean;
  // The current range, bigint mode (it ends above 2^53).
  private big = false;
  private bigValue = 0n;
  private bigEnd = 0n;
  private bigRefillAt: bigint | undefined;
  /** Start of the current range (both modes), to count ids handed out. */
  private currentStart = 0n;

  private readonly pending: Range[] = [];
  private pendingIds = 0n;
  /** Ids of ranges used up. */
  private handedBefore = 0n;
  private rangesFetched = 0;
  private filling: Promise<void> | undefined;
  private retryTimer: ReturnType<typeof setTimeout> | undefined;
  private retries = 0;
  private lastError: LeafClientError | undefined;
  /** Bumped at every failed refill, so that a waiter knows the refill it waited for failed. */
  private failures = 0;
  private wakers: Array<() => void> = [];
  private closed = false;
  private starting: Promise<void> | undefined;
  private readonly sizer: RangeSizer;

  /** @internal Built by `LeafClient.segment()`. */
  constructor(
    private readonly pool: ServerPool,
    private readonly settings: SegmentSettings,
    private readonly stop: AbortSignal,
  ) {
    this.strings = settings.strings;
    this.sizer = new RangeSizer(settings);
  }

  /** The tag. */
  get tag(): string {
    return this.settings.tag;
  }

  /**
   * Fetches the first range (idempotent: the same promise). Call it at boot to fail fast, and
   * before `nextIdSync()`; `nextId()` does not need it.
   */
  start(): Promise<void> {
    this.starting ??= (async () => {
      const deadline = performance.now() + this.settings.timeoutMs;
      while (this.idsLeft() === 0n) await this.waitForIds(deadline, undefined);
    })();
    // A failed start may be retried.
    this.starting.catch(() => {
      this.starting = undefined;
    });
    return this.starting;
  }

  /**
   * The next id from the local cache: no I/O, no await. Throws CACHE_EMPTY when the cache is empty
   * (before the first range, or when the servers could not refill it in time; a refill is started),
   * CLOSED after `close()`.
   */
  nextIdSync(): Id {
    const v = this.value;
    if (v < this.limit) {
      this.value = v + 1;
      if (v >= this.refillAt) this.refill();
      return (this.strings ? String(v) : BigInt(v)) as Id;
    }
    const id = this.takeSlow();
    if (id !== undefined) return id;
    throw this.emptyError();
  }

  /**
   * The next id. Resolves at once from the local cache; when it is empty, waits for the refill (up
   * to the deadline) and rejects with the refill's error (UNAVAILABLE or TIMEOUT from the servers,
   * carrying the last server's code and Leaf code; a server's 4xx such as UNKNOWN_TAG as it is), or
   * TIMEOUT, ABORTED, CLOSED.
   */
  nextId(options?: CallOptions): Promise<Id> {
    const v = this.value;
    if (v < this.limit) {
      this.value = v + 1;
      if (v >= this.refillAt) this.refill();
      return Promise.resolve((this.strings ? String(v) : BigInt(v)) as Id);
    }
    return this.nextIdWaiting(options);
  }

  /** The state of the cache, for monitoring. */
  stats(): SegmentStats {
    return {
      tag: this.settings.tag,
      idsLeft: this.idsLeft(),
      handedOut: this.handed(),
      ranges: this.rangesFetched,
      rangeSize: this.sizer.size,
      idsPerSecond: this.sizer.idsPerSecond,
      refilling: this.filling !== undefined,
      lastError: this.lastError?.message ?? null,
    };
  }

  /** Drops the cache (its ids are never handed out) and stops refilling. Idempotent. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.value = this.limit = 0;
    this.big = false;
    this.bigValue = this.bigEnd = 0n;
    this.pending.length = 0;
    this.pendingIds = 0n;
    if (this.retryTimer) clearTimeout(this.retryTimer);
    this.wake();
  }

  // ---- internals -------------------------------------------------------------------------------

  /** Takes an id outside the number fast path: bigint ranges and switching ranges. */
  private takeSlow(): Id | undefined {
    for (;;) {
      if (this.big) {
        const v = this.bigValue;
        if (v < this.bigEnd) {
          this.bigValue = v + 1n;
          if (this.bigRefillAt !== undefined && v >= this.bigRefillAt) this.refill();
          return (this.strings ? v.toString() : v) as Id;
        }
      } else if (this.value < this.limit) {
        const v = this.value++;
        if (v >= this.refillAt) this.refill();
        return (this.strings ? String(v) : BigInt(v)) as Id;
      }
      const next = this.pending.shift();
      if (next === undefined) {
        if (!this.closed) this.refill();
        return undefined;
      }
      this.pendingIds -= next.end - next.start;
      this.promote(next);
    }
  }

  private promote(range: Range): void {
    this.handedBefore += this.currentEnd() - this.currentStart;
    this.currentStart = range.start;
    if (range.end <= NUMBER_LIMIT) {
      this.big = false;
      this.value = Number(range.start);
      this.limit = Number(range.end);
    } else {
      this.big = true;
      this.value = this.limit = 0;
      this.bigValue = range.start;
      this.bigEnd = range.end;
    }
    this.arm();
  }

  /** End of the current range (both modes), or its start before the first range. */
  private currentEnd(): bigint {
    if (this.big) return this.bigEnd;
    return this.limit === 0 && this.value === 0 ? this.currentStart : BigInt(this.limit);
  }

  /**
   * Sets the refill point: where the ids left (this range's and the fetched ones) fall to
   * `refillThreshold` of the range size. Nothing is armed while a refill is in flight or waits.
   */
  private arm(): void {
    this.refillAt = Number.POSITIVE_INFINITY;
    this.bigRefillAt = undefined;
    if (this.filling !== undefined || this.retryTimer !== undefined || this.closed) return;
    const low = BigInt(Math.ceil(this.sizer.size * this.settings.refillThreshold));
    // The id at which `low` ids are left in all: end + pending - low.
    const end = this.big ? this.bigEnd : BigInt(this.limit);
    const at = end + this.pendingIds - low;
    if (this.big) {
      this.bigRefillAt = at < this.bigValue ? this.bigValue : at;
    } else if (at < end) {
      // Reached already: the next id starts the refill (a failed refill is not retried on its own
      // once the cache is empty; the next caller retries it).
      this.refillAt = Math.max(this.value, Number(at));
    }
  }

  /** Ids left in the cache. */
  private idsLeft(): bigint {
    const current = this.big
      ? this.bigEnd - this.bigValue
      : BigInt(Math.max(0, this.limit - this.value));
    return current + this.pendingIds;
  }

  /** Ids handed out so far. */
  private handed(): bigint {
    const current = this.big
      ? this.bigValue
      : this.limit === 0 && this.value === 0
        ? this.currentStart
        : BigInt(this.value);
    return this.handedBefore + (current - this.currentStart);
  }

  /** Starts the background refill unless one runs; a pending retry is brought forward. */
  private refill(): void {
    this.refillAt = Number.POSITIVE_INFINITY;
    this.bigRefillAt = undefined;
    if (this.filling !== undefined || this.closed) return;
    if (this.retryTimer !== undefined) {
      clearTimeout(this.retryTimer);
      this.retryTimer = undefined;
    }
    this.sizer.measure(this.handed());
    this.filling = this.fill().finally(() => {
      this.filling = undefined;
      this.arm();
      this.wake();
    });
  }

  /**
   * Fetches about the sizer's size in ids: one request, or more when the servers cut the ranges
   * short.
   */
  private async fill(): Promise<void> {
    const ask = Math.min(this.sizer.size, MAX_ASK);
    // One deadline for the whole refill (`timeoutMs`), however many requests the servers' short
    // ranges take: a refill of short ranges from a slow server stops there with what it got.
    const deadline = performance.now() + this.settings.timeoutMs;
    let received = 0;
    try {
      for (
        let n = 0;
        n < MAX_FETCHES && received < ask && !this.closed && performance.now() < deadline;
        n++
      ) {
        const range = await fetchRange(
          this.pool,
          this.settings,
          ask - received,
          deadline,
          this.stop,
        );
        if (this.closed) return;
        received += Number(range.end - range.start);
        this.rangesFetched++;
        this.pending.push(range);
        this.pendingIds += range.end - range.start;
        this.wake();
      }
      this.retries = 0;
      this.lastError = undefined;
    } catch (error) {
      if (this.closed) return;
      this.failures++;
      this.lastError =
        error instanceof LeafClientError
          ? error
          : new LeafClientError({
              code: ClientErrorCodes.UNAVAILABLE,
              message: String(error),
              cause: error,
            });
      // Ids left: try again before they run out. None left: the next caller starts the refill.
      if (this.idsLeft() > 0n) {
        const wait = Math.min(
          this.settings.retryMaxMs,
          this.settings.retryBaseMs * 2 ** this.retries++,
        );
        this.retryTimer = setTimeout(
          () => {
            this.retryTimer = undefined;
            this.refill();
          },
          wait * (0.5 + Math.random() * 0.5),
        );
        this.retryTimer.unref?.();
      }
    }
  }

  private async nextIdWaiting(options: CallOptions | undefined): Promise<Id> {
    const deadline = performance.now() + (options?.timeoutMs ?? this.settings.timeoutMs);
    for (;;) {
      const id = this.takeSlow();
      if (id !== undefined) return id;
      await this.waitForIds(deadline, options?.signal);
    }
  }

  /**
   * Waits until a range arrives (resolves), the refill fails (rejects with its error), or the
   * deadline or signal ends the wait.
   */
  private waitForIds(deadline: number, signal: AbortSignal | undefined): Promise<void> {
    if (this.closed) return Promise.reject(this.closedError());
    if (signal?.aborted) return Promise.reject(aborted(signal));
    this.refill();
    const failuresBefore = this.failures;
    const left = deadline - performance.now();
    if (left <= 0) return Promise.reject(this.timeoutError(0));
    return new Promise<void>((resolve, reject) => {
      const done = () => {
        clearTimeout(timer);
        signal?.removeEventListener("abort", onAbort);
      };
      const waker = () => {
        done();
        if (this.closed) reject(this.closedError());
        else if (this.idsLeft() > 0n) resolve();
        else if (this.failures !== failuresBefore) reject(this.lastError);
        else if (this.filling !== undefined) this.wakers.push(waker);
        else resolve();
      };
      const onAbort = () => {
        this.unwait(waker);
        done();
        reject(aborted(signal!));
      };
      const timer = setTimeout(() => {
        this.unwait(waker);
        signal?.removeEventListener("abort", onAbort);
        reject(this.timeoutError(left));
      }, left);
      signal?.addEventListener("abort", onAbort, { once: true });
      this.wakers.push(waker);
    });
  }

  private unwait(waker: () => void): void {
    const i = this.wakers.indexOf(waker);
    if (i !== -1) this.wakers.splice(i, 1);
  }

  private wake(): void {
    const wakers = this.wakers;
    this.wakers = [];
    for (const w of wakers) w();
  }

  private emptyError(): LeafClientError {
    if (this.closed) return this.closedError();
    return new LeafClientError({
      code: ClientErrorCodes.CACHE_EMPTY,
      message:
        `no id of tag ${JSON.stringify(this.settings.tag)} in the local cache` +
        (this.lastError
          ? ` (the last refill failed: ${this.lastError.message.replace(/^\[leaf\] \[client\] /, "")})`
          : this.rangesFetched === 0
            ? " (no range fetched yet: await start() first)"
            : " (a refill is in flight)") +
        "; use nextId(), which waits for the refill",
      leafCode: this.lastError?.leafCode,
      cause: this.lastError,
    });
  }

  private timeoutError(waitedMs: number): LeafClientError {
    return new LeafClientError({
      code: ClientErrorCodes.TIMEOUT,
      message:
        `no id of tag ${JSON.stringify(this.settings.tag)} within ${Math.round(waitedMs)} ms: the cache is empty and no refill arrived` +
        (this.lastError
          ? ` (last failure: ${this.lastError.message.replace(/^\[leaf\] \[client\] /, "")})`
          : ""),
      leafCode: this.lastError?.leafCode,
      cause: this.lastError,
    });
  }

  private closedError(): LeafClientError {
    return new LeafClientError({
      code: ClientErrorCodes.CLOSED,
      message: `the ids of tag ${JSON.stringify(this.settings.tag)} are closed (client.close() or segment close())`,
    });
  }
}

function aborted(signal: AbortSignal): LeafClientError {
  return new LeafClientError({
    code: ClientErrorCodes.ABORTED,
    message: "the call was aborted by its AbortSignal",
    cause: signal.reason,
  });
}
