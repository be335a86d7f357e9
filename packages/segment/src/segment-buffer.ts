// One tag's buffer: the range ids are handed out from, and the ranges loaded ahead of it in the
// background (one: Leaf's double buffer; more while the prefetch depth has grown). The current
// range's counter is a JS number while the range ends at or below 2^53 (a number add and one
// BigInt() per id) and a bigint above, so every id stays exact.
import type { LeafError } from "@leaf/core";
import { firstIdOf, idsLeftIn, isStrided, residueOf, type StrideFloors } from "./residue-range";
import type { SegmentRange } from "./segment-store";

/** Ranges that end at or below this are counted with JS numbers. */
const NUMBER_LIMIT = 2n ** 53n;

/** Someone waiting in `nextId` for the next range. */
export interface Waiter {
  /** performance.now() past which the wait fails. */
  deadline: number;
  resolve(): void;
  reject(error: unknown): void;
  timer: ReturnType<typeof setTimeout>;
}

/** A range's state, as Java Leaf's Segment shows it: next id, end (exclusive) and step. */
export interface RangeSnapshot {
  /** The next id this range hands out (its start when unused). */
  value: bigint;
  /** One past the last id of the range. */
  max: bigint;
  /** Ids in the range. */
  step: number;
  /**
   * A residue set's range (see {@link SegmentRange.stride}): only its ids with `id % stride ===
   * remainder` are handed out. Absent for a range of every id.
   */
  stride?: number;
  remainder?: number;
}

/** The buffer of one tag. Fields are public to the generator, which owns every change. */
export class TagBuffer {
  // The current range. Hot fields first; `limit` is 0 when the range is empty or counted in bigint.
  /** Next id, number mode. */
  value = 0;
  /**
   * Below this, an id is `value` with nothing else to check: min(limit, preloadAt) while the buffer
   * serves a range counted in numbers, 0 otherwise (removed, or counted in bigint). The single-id
   * fast paths compare with it alone; at or past it they take the path that checks everything.
   * Kept by `promote`, `disarm` and `remove`.
   */
  fastEnd = 0;
  /** One past the last id, number mode; 0 otherwise. */
  limit = 0;
  /** The value at which the next range is loaded (Infinity when loaded, loading or disarmed). */
  preloadAt = Number.POSITIVE_INFINITY;
  /** The range is counted in bigint (it ends above 2^53). */
  big = false;
  bigValue = 0n;
  /** The bigint value at which the next range is loaded, when `bigArmed`. */
  bigPreloadAt = 0n;
  bigArmed = false;
  /**
   * Between two ids of the current range: 1 except for a range of one residue class (a residue
   * set's), which is counted in bigint and hands out every `stride`-th id.
   */
  stride = 1n;
  /** The residue class of the current range's ids (with `stride` above 1). */
  remainder = 0;
  start = 0n;
  end = 0n;
  step = 0;
  /** Java Leaf's currentPos: which of the two segment slots is current; flips on every switch. */
  pos: 0 | 1 = 0;
  /** A range has been handed to the buffer at least once. */
  initialized = false;

  /**
   * Ranges loaded and ready after the current one, in order (Java Leaf's second segment is the
   * first of them). The loader keeps `depth` of them when it can.
   */
  ahead: SegmentRange[] = [];
  /**
   * Ranges to keep ready ahead of the current one: 1 is Leaf's double buffer. Grows when a range
   * lasts less than a few loads take or a request finds no id ready, shrinks when ranges outlast
   * many loads; bounded by the generator's `prefetch.maxDepth`.
   */
  depth = 1;
  /** Requests that found no id ready (each then waited for a load, or failed with -3). */
  starvations = 0;
  /**
   * Set from a request finding no id ready until the next load succeeds (one growth per episode).
   */
  starving = false;
  /** Clock time (ms) at which the current range became current. */
  currentSince = 0;
  /** The slowest recent load, in ms, decaying with time: what the prefetch depth covers. */
  slowLoadMs = 0;
  /** performance.now() of the load that last set `slowLoadMs`. */
  slowLoadAt = 0;
  /** Ranges used up since the last load started: Leaf's dynamic step is judged per range. */
  switchesSinceLoad = 0;
  /** Ranges a load brought after the buffer was removed (at close): never handed out. */
  late: SegmentRange[] = [];
  /**
   * A range taken whose end could not be written to the high-water file (a full disk): never
   * served; the retry writes it again instead of taking another range, so a failing disk costs one
   * load's ids, not one per retry. `count` is the number of ranges it was taken as.
   */
  unwritten: { range: SegmentRange; count: number } | undefined = undefined;
  /** A load is in flight (cleared by the load itself before it wakes anyone). */
  loading = false;
  /** The retry after a failed load. */
  retryTimer: ReturnType<typeof setTimeout> | undefined = undefined;
  /** When the retry runs, in performance.now() ms. */
  retryAt: number | undefined = undefined;
  /**
   * A range starting below it is refused: one past the highest id of any range accepted, or the
   * node's stored high-water mark of the tag when that is higher.
   */
  floor: bigint;
  /** One past the highest id of any range this process accepted (the floor without the mark). */
  taken = 0n;
  /** Per residue class, the strided ranges accepted (`floor` and `taken` count the others). */
  strided: StrideFloors | undefined = undefined;

  // Dynamic step and monitoring.
  /** Step of the last range taken. */
  lastStep = 0;
  /** The store's step for the tag, as of the last range taken. */
  tableStep = 0;
  /** Clock time (ms) of the last successful load. */
  lastLoadAt: number | undefined = undefined;
  lastLoadDurationMs: number | undefined = undefined;
  loads = 0;
  loadFailures = 0;
  consecutiveFailures = 0;
  lastError: unknown = undefined;
  waiters: Waiter[] = [];
  removed = false;
  /**
   * Set while the tag gets no range: the CORRUPT_DATA error that refused its last range (its ranges
   * dropped), or TAG_EXHAUSTED (no range fits below 2^63 - 1; the ranges held are still served).
   */
  refused: LeafError | undefined = undefined;
  /** The store moved its max id for the refused range: a refresh cannot tell a fix from that. */
  refusedUntilRestart = false;
  /** Near 2^63 - 1 a larger range did not fit: ranges of the table's step only, one at a time. */
  tableStepOnly = false;

  constructor(
    readonly tag: string,
    floor: bigint,
  ) {
    this.floor = floor;
    this.markBefore = floor;
  }

  /**
   * The floor this buffer started with (the node's stored mark, or the end of the ranges an
   * earlier buffer of the tag took): ids below it may have been handed out before its ranges.
   */
  readonly markBefore: bigint;
  /** Where the last range this buffer left behind (used up) ended, if any. */
  private servedEnd: bigint | undefined;

  /**
   * One past the highest id this buffer handed out: its position in the current range once it
   * served from it; else where the range before ended; else the mark it started with (it handed
   * out nothing, and a range it loaded but never served is no id handed out).
   */
  handedOutEnd(): bigint {
    if (!this.initialized) return this.markBefore;
    const at = this.position();
    if (at > this.start) return at;
    return this.servedEnd ?? this.markBefore;
  }

  /** True when the current range has no id left. */
  currentEmpty(): boolean {
    return this.big ? this.bigValue >= this.end : this.value >= this.limit;
  }

  /** Ids left in the current range. */
  currentLeft(): bigint {
    if (!this.initialized) return 0n;
    if (this.stride > 1n)
      return this.bigValue >= this.end
        ? 0n
        : (this.end - this.bigValue + this.stride - 1n) / this.stride;
    return this.big ? this.end - this.bigValue : BigInt(this.limit - this.value);
  }

  /**
   * Makes `range` current (no I/O) and arms the preload at `threshold` of it. A range of one
   * residue class (a stride above 1) is counted in bigint from its first id of that class.
   */
  promote(range: SegmentRange, threshold: number): void {
    const offset = Math.ceil(range.step * threshold);
    if (this.initialized) this.servedEnd = this.handedOutEnd();
    this.start = range.start;
    this.end = range.end;
    this.step = range.step;
    if (this.initialized) this.pos = this.pos === 0 ? 1 : 0;
    this.initialized = true;
    this.stride = isStrided(range) ? BigInt(range.stride!) : 1n;
    this.remainder = isStrided(range) ? (range.remainder ?? 0) : 0;
    if (range.end <= NUMBER_LIMIT && this.stride === 1n) {
      this.big = false;
      this.value = Number(range.start);
      this.limit = Number(range.end);
      this.preloadAt = this.value + offset;
    } else {
      this.big = true;
      this.value = 0;
      this.limit = 0;
      this.bigValue = firstIdOf(range);
      this.bigPreloadAt = range.start + BigInt(offset);
      this.bigArmed = true;
      this.preloadAt = Number.POSITIVE_INFINITY;
    }
    this.updateFastEnd();
  }

  /** Drops the ids left in the current range and the ranges ahead: none of them is handed out. */
  drop(): void {
    this.ahead = [];
    this.disarm();
    if (this.big) this.bigValue = this.end;
    else this.value = this.limit;
  }

  /** The first range ready after the current one (Java Leaf's next segment), if any. */
  get next(): SegmentRange | undefined {
    return this.ahead[0];
  }

  /** The next id of the current range (its end when used up), as a bigint. */
  position(): bigint {
    // A range of one residue class steps past its end: the position stops there.
    if (this.big) {
      if (this.bigValue > this.end) return this.end;
      return this.bigValue;
    }
    return BigInt(Math.min(this.value, this.limit));
  }

  /** Ids left in the ranges ready after the current one. */
  aheadLeft(): bigint {
    let n = 0n;
    for (const r of this.ahead) n += idsLeftIn(r);
    return n;
  }

  /** Disarms the preload trigger (a load is starting). */
  disarm(): void {
    this.preloadAt = Number.POSITIVE_INFINITY;
    this.bigArmed = false;
    this.updateFastEnd();
  }

  /** The buffer no longer serves (its tag was deleted, or the generator closed). */
  remove(): void {
    this.removed = true;
    this.updateFastEnd();
  }

  private updateFastEnd(): void {
    this.fastEnd = this.removed || this.big ? 0 : Math.min(this.limit, this.preloadAt);
  }

  /** The current range as Java Leaf's Segment shows it, or null before the first range. */
  currentSnapshot(): RangeSnapshot | null {
    if (!this.initialized) return null;
    return {
      value: this.position(),
      max: this.end,
      step: this.step,
      ...residueOf({ stride: Number(this.stride), remainder: this.remainder }),
    };
  }
}
