// How many ids a segment's next refill asks for: the rate ids were handed out at (a moving average,
// measured at each refill) times `targetSeconds`, kept within [minRangeSize, maxRangeSize]. Apart
// from segment-ids.ts, whose class holds the cache and the hot path of every id.
import { performance } from "node:perf_hooks";

/** What the sizing needs of a segment's settings. */
export interface SizingSettings {
  /** Seconds of ids one range should last at the observed rate. */
  targetSeconds: number;
  minRangeSize: number;
  maxRangeSize: number;
}

/** The adaptive range size of one segment; starts at `minRangeSize`. */
export class RangeSizer {
  /** The size the next refill asks for. */
  size: number;
  /** Ids per ms, moving average; 0 before the first measurement. */
  private rate = 0;
  private measuredAt = performance.now();
  private measuredHanded = 0n;

  constructor(private readonly settings: SizingSettings) {
    this.size = settings.minRangeSize;
  }

  /** Observed rate, ids per second. */
  get idsPerSecond(): number {
    return Math.round(this.rate * 1000);
  }

  /** Updates the observed rate from `handed` (ids handed out so far) and {@link size}. */
  measure(handed: bigint): void {
    const now = performance.now();
    const elapsed = now - this.measuredAt;
    // Too short a window says little (the first calls after start, a burst).
    if (elapsed >= 20 || handed - this.measuredHanded >= BigInt(this.size)) {
      const rate = Number(handed - this.measuredHanded) / Math.max(elapsed, 1);
      this.rate = this.rate === 0 ? rate : this.rate * 0.5 + rate * 0.5;
      this.measuredAt = now;
      this.measuredHanded = handed;
    }
    const { minRangeSize, maxRangeSize, targetSeconds } = this.settings;
    const wanted = Math.ceil(this.rate * targetSeconds * 1000);
    this.size = Math.min(maxRangeSize, Math.max(minRangeSize, wanted));
  }
}
