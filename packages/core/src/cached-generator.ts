// A ring buffer of ids filled ahead of demand (after Baidu's CachedUidGenerator), so that a burst
// larger than one tick's sequence space is served at once. Unlike Baidu's, it never borrows future
// time: ids are made by the wrapped generator at the clock's pace, and an id whose time is ahead of
// the clock by more than `maxAheadMs` (the clock moved back after the fill) is never handed out.
import { argumentError, ErrorCodes, LeafCodes, LeafError } from "./errors";
import type { SnowflakeGenerator } from "./snowflake-generator";

const COMPONENT = "core";

/** Options of {@link CachedSnowflakeGenerator}. */
export interface CachedGeneratorOptions {
  /** Capacity of the ring in ids (default 8 ticks of the layout's sequence space). */
  bufferSize?: number;
  /** Refill when fewer than this percentage of the capacity remains (default 50, as Baidu). */
  paddingFactor?: number;
  /** Also refill on a schedule every this many ms (default: off). */
  scheduleIntervalMs?: number;
  /**
   * An id whose time is ahead of the clock by more than this (ms) is not handed out (default 0:
   * never ahead). It can only happen when the clock moves back after the buffer was filled.
   */
  maxAheadMs?: number;
  /** Ids made per fill step before yielding the event loop (default: one tick's sequence space). */
  fillChunk?: number;
}

/**
 * Wraps a {@link SnowflakeGenerator} it owns: nothing else may issue ids from that generator.
 * Refills in the background (a macrotask) when the buffer runs low, synchronously when it is empty.
 */
export class CachedSnowflakeGenerator {
  private readonly ring: bigint[];
  private readonly capacity: number;
  private readonly threshold: number;
  private readonly maxAheadMs: number;
  private readonly chunk: number;
  private head = 0;
  private count = 0;
  /** Timestamp (ms) of the newest id in the ring. */
  private newestMs = 0;
  private refillScheduled = false;
  private timer: NodeJS.Timeout | undefined;
  private closed = false;

  constructor(
    readonly generator: SnowflakeGenerator,
    options: CachedGeneratorOptions = {},
  ) {
    const layout = generator.layout;
    this.capacity = options.bufferSize ?? (layout.maxSequence + 1) * 8;
    if (!Number.isInteger(this.capacity) || this.capacity < 2 || this.capacity > 50_000_000) {
      throw argumentError(
        COMPONENT,
        "bufferSize",
        options.bufferSize,
        "an integer from 2 to 50,000,000",
      );
    }
    const padding = options.paddingFactor ?? 50;
    if (typeof padding !== "number" || !(padding > 0 && padding < 100)) {
      throw argumentError(
        COMPONENT,
        "paddingFactor",
        padding,
        "a percentage between 0 and 100 (exclusive)",
      );
    }
    this.threshold = Math.max(1, Math.floor((this.capacity * padding) / 100));
    this.maxAheadMs = options.maxAheadMs ?? 0;
    if (!(this.maxAheadMs >= 0)) {
      throw argumentError(COMPONENT, "maxAheadMs", options.maxAheadMs, "0 or more ms");
    }
    this.chunk = Math.min(this.capacity, options.fillChunk ?? layout.maxSequence + 1);
    this.ring = new Array(this.capacity);
    const interval = options.scheduleIntervalMs;
    if (interval !== undefined) {
      if (!Number.isInteger(interval) || interval < 1) {
        throw argumentError(
          COMPONENT,
          "scheduleIntervalMs",
          interval,
          "a whole number of ms, 1 or more",
        );
      }
      this.timer = setInterval(() => this.fill(this.capacity), interval);
      this.timer.unref();
    }
  }

  /** Ids in the buffer now. */
  get available(): number {
    return this.count;
  }

  /** Capacity of the buffer. */
  get size(): number {
    return this.capacity;
  }

  /** Fills the buffer completely (for example at start, before traffic arrives). */
  prefill(): void {
    this.fill(this.capacity);
  }

  /** Hands out one id from the buffer (filling it first when empty). */
  nextId(): bigint {
    if (this.count === 0) this.fill(this.chunk);
    if (this.newestMs - this.maxAheadMs > this.generator.clock.now()) this.checkAhead();
    const id = this.ring[this.head]!;
    this.head = this.head + 1 === this.capacity ? 0 : this.head + 1;
    this.count--;
    if (this.count < this.threshold) this.scheduleRefill();
    return id;
  }

  /**
   * Hands out `count` ids in increasing order (sorted when the buffer holds ids from before and
   * after a move to a backup worker id, which start lower).
   */
  nextIds(count: number): bigint[] {
    if (!Number.isInteger(count) || count < 1 || count > 10_000_000) {
      throw argumentError(COMPONENT, "count", count, "an integer from 1 to 10,000,000");
    }
    const out: bigint[] = new Array(count);
    let unordered = false;
    for (let i = 0; i < count; i++) {
      out[i] = this.nextId();
      if (i > 0 && out[i]! <= out[i - 1]!) unordered = true;
    }
    if (unordered) out.sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
    return out;
  }

  /** Stops the schedule and drops the buffered ids. */
  close(): void {
    this.closed = true;
    clearInterval(this.timer);
    this.count = 0;
  }

  private scheduleRefill(): void {
    if (this.refillScheduled || this.closed) return;
    this.refillScheduled = true;
    setImmediate(() => {
      this.refillScheduled = false;
      if (this.closed) return;
      // One chunk per turn, so a refill never holds the event loop for long.
      this.fill(this.chunk);
      if (this.count < this.capacity) this.scheduleRefill();
    });
  }

  /** Adds up to `wanted` ids, never more than the free space. */
  private fill(wanted: number): void {
    if (this.closed) {
      throw new LeafError({
        component: COMPONENT,
        code: ErrorCodes.CLOSED,
        message: "cached generator is closed",
      });
    }
    const n = Math.min(wanted, this.capacity - this.count);
    if (n <= 0) return;
    const ids = this.generator.nextIds(n);
    let tail = (this.head + this.count) % this.capacity;
    for (const id of ids) {
      this.ring[tail] = id;
      tail = tail + 1 === this.capacity ? 0 : tail + 1;
    }
    this.count += n;
    this.newestMs = this.generator.decode(ids[n - 1]!).timestampMs;
  }

  /** The clock is behind the newest buffered id: refuse the head id if it is too far ahead. */
  private checkAhead(): void {
    const now = this.generator.clock.now();
    const headMs = this.generator.decode(this.ring[this.head]!).timestampMs;
    const ahead = headMs - now;
    if (ahead > this.maxAheadMs) {
      throw new LeafError({
        component: COMPONENT,
        code: ErrorCodes.CLOCK_MOVED_BACKWARDS,
        leafCode: LeafCodes.SNOWFLAKE_CLOCK_MOVED_BACKWARDS,
        message: `buffered id is ${ahead} ms ahead of the clock (bound ${this.maxAheadMs} ms): the clock moved back after the buffer was filled; retry when it catches up`,
        details: { aheadMs: ahead, maxAheadMs: this.maxAheadMs },
      });
    }
  }
}
