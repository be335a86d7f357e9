// The cache of sequence ranges, one counter per slot: the namespace's, or one per shard with
// sequenceScope "shard". A slot serves its ranges of one second in order; a later second resets it.
import { argumentError, type Layout } from "@leaf/core";

const COMPONENT = "redis-sequence";

/** A range of sequences, both ends included. */
export interface Range {
  first: number;
  last: number;
}

/** The cached ranges of one counter: the namespace's, or one shard's (sequenceScope "shard"). */
export class Slot {
  /** The second (Unix seconds) the cached ranges belong to; -1 before the first. */
  second = -1;
  /** Next sequence of the current range, and its last. */
  next = 0;
  last = -1;
  /** Further ranges of the same second (prefetched), in order. */
  queue: Range[] = [];
  /** Sequences left in the current and the queued ranges. */
  remaining = 0;
  /** Every range granted for `second`, to keep random fallback sequences out of them. */
  grants: Range[] = [];
  refillsThisSecond = 0;
  /** The latest second whose sequence space Redis reported used up (or locked). */
  usedUpSecond = -1;
  /**
   * The lowest second Redis grants this counter after it refused one at or below the counter's
   * high-water second (Redis TIME went back to seconds already served); -1 before any refusal.
   */
  floorSecond = -1;
  /** The round trip in flight for this counter, shared by every caller that waits for it. */
  refill: Promise<void> | undefined;

  constructor(
    readonly shard: number | undefined,
    public batch: number,
  ) {}

  /** True when less than a quarter of a range is left: time to fetch the next one. */
  get low(): boolean {
    return this.remaining * 4 < this.batch;
  }

  /**
   * Takes one sequence for `second`, or -1. A slot whose second is ahead of the clock (the clock
   * stepped back a little, or the Redis offset moved) still serves: its ids are unique, and Redis
   * granted that second within the allowed skew.
   */
  take(second: number): number {
    return this.takeRun(second, 1) === 1 ? this.next - 1 : -1;
  }

  /** Takes up to `max` consecutive sequences of the current range; returns how many. */
  takeRun(second: number, max: number): number {
    if (this.second < second) return 0;
    if (this.next > this.last) {
      const range = this.queue.shift();
      if (!range) return 0;
      this.next = range.first;
      this.last = range.last;
    }
    const taken = Math.min(max, this.last - this.next + 1);
    this.next += taken;
    this.remaining -= taken;
    return taken;
  }

  /**
   * The size of the next range to ask for `second`: doubled (up to `max`) when demand outgrew the
   * ranges within the second, halved (down to `min`) when most of the last second's went unused.
   */
  resize(second: number, min: number, max: number): void {
    if (this.second === second && this.refillsThisSecond > 0) {
      // Demand outgrew the range within this second: take more per round trip.
      this.batch = Math.min(this.batch * 2, max);
    } else if (this.second >= 0 && this.second < second && this.remaining * 2 > this.batch) {
      // Most of the last range went unused: take less, leave the shared space to others.
      this.batch = Math.max(Math.floor(this.batch / 2), min);
    }
  }

  /**
   * Keeps a range Redis granted: queued behind the current one for the same second, replacing the
   * cache for a later second (or the current one), dropped for a second the cache has moved past.
   */
  store(
    second: number,
    first: number,
    last: number,
    currentSecond: () => number,
    maxSequence: number,
  ): void {
    if (second === this.second) {
      this.queue.push({ first, last });
      this.refillsThisSecond++;
    } else if (second > this.second || second === currentSecond()) {
      this.second = second;
      this.next = first;
      this.last = last;
      this.queue = [];
      this.remaining = 0;
      this.grants = [];
      this.refillsThisSecond = 1;
    } else {
      return; // A range of a second the cache has moved past: never used.
    }
    this.remaining += last - first + 1;
    this.grants.push({ first, last });
    if (last >= maxSequence) this.usedUpSecond = Math.max(this.usedUpSecond, second);
  }
}

/** The slots of a sequence: one for the namespace, or one per shard made on first use. */
export class SlotCache {
  private readonly perShard: Slot[] = [];
  private readonly namespaceSlot: Slot | undefined;

  constructor(
    private readonly layout: Layout,
    sequenceScope: "namespace" | "shard",
    private readonly minBatchSize: number,
  ) {
    if (sequenceScope === "namespace") this.namespaceSlot = new Slot(undefined, minBatchSize);
  }

  /**
   * The slot that serves `shard`.
   * @throws LeafError INVALID_ARGUMENT unless `shard` is an integer from 0 to layout.maxWorkerId.
   */
  slotFor(shard: number): Slot {
    const maxShard = this.layout.maxWorkerId;
    if (!Number.isInteger(shard) || shard < 0 || shard > maxShard) {
      throw argumentError(
        COMPONENT,
        "shard",
        shard,
        `an integer from 0 to ${maxShard} (layout ${this.layout.name})`,
      );
    }
    if (this.namespaceSlot) return this.namespaceSlot;
    let slot = this.perShard[shard];
    if (!slot) {
      slot = new Slot(shard, this.minBatchSize);
      this.perShard[shard] = slot;
    }
    return slot;
  }

  /** Every slot made so far. */
  all(): Slot[] {
    return this.namespaceSlot ? [this.namespaceSlot] : this.perShard.filter(Boolean);
  }
}
