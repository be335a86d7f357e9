// Loading ranges into the tags' buffers: taking ids and switching ranges, the one background load
// per tag (of one range, or several in one round trip while the prefetch depth has grown), the
// depth's growth and shrinking, retries with backoff after a failure, refusal of a corrupt range,
// and waits for a range.
import { performance } from "node:perf_hooks";
import {
  type BackoffOptions,
  backoffDelay,
  type Clock,
  ErrorCodes,
  isLeafError,
  LeafCodes,
  LeafError,
} from "@leaf/core";
import { bareMessage } from "@leaf/core/adapter";
import { type DynamicStep, nextDynamicStep } from "./dynamic-step";
import type { GeneratorErrorContext } from "./generator-options";
import { belowHighWater, type HighWaterMarks } from "./high-water";
import { isStrided, StrideFloors } from "./residue-range";
import type { TagBuffer, Waiter } from "./segment-buffer";
import type { SegmentRange, SegmentStore } from "./segment-store";
import { badRange, COMPONENT, MAX_STEP, maxIdMovedBack, rangeProblem } from "./validation";

/** What a {@link TagLoader} needs of its generator. */
export interface TagLoaderSettings {
  store: SegmentStore;
  threshold: number;
  dynamic: DynamicStep | undefined;
  waitMs: number;
  retry: BackoffOptions;
  clock: Clock;
  /** Passes an error to the generator's `onError`. */
  report: (error: unknown, context: GeneratorErrorContext) => void;
  /** True once the generator is closed. */
  closed: () => boolean;
  /**
   * Largest prefetch depth (ranges ready ahead of the current one); 1 keeps Leaf's double buffer.
   */
  maxDepth: number;
  /** Where each range's end is stored before the range is served, if the node keeps marks. */
  highWater: HighWaterMarks | undefined;
}

/** The depth grows while the ids ready ahead would last fewer than this many (slow) loads. */
const GROW_LOADS = 4;
/**
 * The depth shrinks while, one range fewer, the ids ready ahead would still last this many loads.
 */
const SHRINK_LOADS = 16;
/** The slowest recent load is remembered with this half-life, in ms (a slow load comes back). */
const SLOW_LOAD_HALF_LIFE_MS = 30_000;

/**
 * Fills the {@link TagBuffer}s of one generator from its store. It holds no tags itself: the
 * generator decides which tags exist and hands their buffers in.
 */
export class TagLoader {
  /** Loads in flight, awaited by the generator's `close()`. */
  readonly inFlight = new Set<Promise<void>>();
  private readonly store: SegmentStore;
  private readonly threshold: number;
  private readonly dynamic: DynamicStep | undefined;
  private readonly waitMs: number;
  private readonly retry: BackoffOptions;
  private readonly clock: Clock;
  private readonly report: TagLoaderSettings["report"];
  private readonly closed: () => boolean;
  private readonly maxDepth: number;
  private readonly highWater: HighWaterMarks | undefined;

  constructor(settings: TagLoaderSettings) {
    this.store = settings.store;
    this.threshold = settings.threshold;
    this.dynamic = settings.dynamic;
    this.waitMs = settings.waitMs;
    this.retry = settings.retry;
    this.clock = settings.clock;
    this.report = settings.report;
    this.closed = settings.closed;
    this.maxDepth = settings.maxDepth;
    this.highWater = settings.highWater;
  }

  /**
   * Takes one id from the current range, switching to the next range when the current one is used
   * up. No I/O: when no range has ids it starts a load and answers undefined.
   */
  take(b: TagBuffer): bigint | undefined {
    for (;;) {
      if (b.big) {
        const v = b.bigValue;
        if (v < b.end) {
          b.bigValue = v + b.stride;
          if (b.bigArmed && v >= b.bigPreloadAt) this.preload(b);
          return v;
        }
      } else {
        const v = b.value;
        if (v < b.limit) {
          b.value = v + 1;
          if (v >= b.preloadAt) this.preload(b);
          return BigInt(v);
        }
      }
      const next = b.ahead.shift();
      if (next === undefined) {
        if (b.initialized) this.starved(b);
        this.startLoad(b);
        return undefined;
      }
      this.switched(b);
      b.promote(next, this.threshold);
      // A deeper prefetch refills as soon as a range leaves the queue, not at the preload point.
      if (b.depth > 1) this.startLoad(b);
    }
  }

  /**
   * A request found no id ready in a tag that had ranges: the ranges ahead did not cover a load.
   * The depth doubles (bounded) once per such episode; `starvations` counts every request.
   */
  private starved(b: TagBuffer): void {
    b.starvations++;
    if (b.starving) return;
    b.starving = true;
    b.depth = Math.min(b.depth * 2, this.maxDepth);
  }

  /**
   * The current range is used up and the next becomes current: the depth follows how long that
   * range lasted against the slowest recent load. It grows by one while the ranges ahead, at that
   * pace, would last fewer than GROW_LOADS loads, and shrinks by one while one range fewer would
   * still last SHRINK_LOADS loads (idle), so a burst deepens the prefetch before callers wait and
   * a quiet tag goes back to Leaf's double buffer. Times come from the generator's clock.
   */
  private switched(b: TagBuffer): void {
    const now = this.clock.now();
    const lasted = now - b.currentSince;
    b.currentSince = now;
    b.switchesSinceLoad++;
    if (this.maxDepth <= 1) return;
    if (lasted * b.depth <= GROW_LOADS * b.slowLoadMs) {
      b.depth = Math.min(b.depth + 1, this.maxDepth);
    } else if (b.depth > 1 && lasted * (b.depth - 1) > SHRINK_LOADS * b.slowLoadMs) {
      b.depth--;
    }
  }

  /** The preload point was reached: load the next range unless one is loaded or loading. */
  preload(b: TagBuffer): void {
    b.disarm();
    this.startLoad(b);
  }

  /**
   * Starts the one background load of `b` unless it has its depth of ranges ready ahead, a load,
   * or a retry pending.
   */
  startLoad(b: TagBuffer): Promise<void> | undefined {
    if (
      b.removed ||
      b.refused !== undefined ||
      b.loading ||
      b.ahead.length >= b.depth ||
      b.retryTimer !== undefined
    )
      return undefined;
    b.disarm();
    b.loading = true;
    // The load starts in a microtask: even its synchronous part (a pooled connection, the statement
    // written to the socket) stays off the path of the call that reached the preload point.
    const loading = Promise.resolve().then(() => this.load(b));
    this.inFlight.add(loading);
    void loading.then(() => this.inFlight.delete(loading));
    return loading;
  }

  private async load(b: TagBuffer): Promise<void> {
    const startedAt = performance.now();
    const leftAtStart = b.currentLeft() + b.aheadLeft();
    const now = this.clock.now();
    // As Java Leaf: the first two ranges take the table's step. Its buffer's updateTimestamp stays
    // 0 through the first load and is set by the second, so the dynamic step starts with the third
    // range, measured from the second load (ranges of a busy tag: 2000, 2000, 4000, ...). Leaf's
    // rule judges how long one range lasts. With one range ahead (Leaf's double buffer) one range
    // is used up between two loads; with a deeper prefetch, loads bring several ranges or are
    // skipped, so the time since the last load is divided by the ranges used up meanwhile.
    const step =
      this.dynamic === undefined || b.loads < 2 || b.lastLoadAt === undefined || b.tableStepOnly
        ? undefined
        : nextDynamicStep(
            b.lastStep,
            b.tableStep,
            (now - b.lastLoadAt) / Math.max(1, b.switchesSinceLoad),
            this.dynamic,
          );
    b.switchesSinceLoad = 0;
    // A deeper prefetch fills its gap in one round trip: one range of `count` steps, split below.
    const perRange = step ?? b.tableStep;
    const held = b.unwritten;
    b.unwritten = undefined;
    let count =
      held !== undefined
        ? held.count
        : b.depth > 1 && perRange > 0 && !b.tableStepOnly
          ? Math.max(1, Math.min(b.depth - b.ahead.length, Math.floor(MAX_STEP / perRange)))
          : 1;
    // Read before the range is taken: a refresh that reads the row after this take counts this
    // node's own range, which must not judge it.
    const seen = this.highWater?.seenOf(b.tag);
    let range: SegmentRange;
    // The store handed over a range the generator itself refuses: the store moved its max id for
    // it.
    let taken = false;
    try {
      if (held !== undefined) {
        range = held.range;
      } else {
        range = await this.store.takeRange(
          b.tag,
          count > 1 ? perRange * count : step,
          this.storeFloor(b),
        );
        taken = true;
        this.check(b, range);
        if (seen !== undefined && range.start < seen) {
          range = await this.skipTo(b, range, seen, perRange);
          count = 1;
        }
      }
      taken = true;
      // The range's end is on disk before any id of it is served: a restart remembers it. When it
      // cannot be written the range is not served and the retry writes it again (no new range).
      if (this.highWater !== undefined && !b.removed) {
        try {
          await this.highWater.raise(b.tag, range.end);
        } catch (error) {
          b.unwritten = { range, count };
          throw error;
        }
      }
    } catch (error) {
      b.loading = false;
      // A batch, or a dynamic step above the table's, that would pass 2^63 - 1 may fit as one range
      // of the table's step: that is asked for at once (the store refused without moving its max
      // id), and from then on only that.
      if (isLeafError(error, ErrorCodes.TAG_EXHAUSTED) && !b.removed) {
        if (count > 1 || (step !== undefined && step > b.tableStep)) {
          b.depth = 1;
          b.tableStepOnly = true;
          this.startLoad(b);
          return;
        }
      }
      // A damaged row or a max id behind this process's ids is not retried: each retry could move
      // max_id on, into ranges other processes hold. The tag waits for an operator. A used-up tag
      // is not retried either: no retry can find room.
      // A gap too wide to skip below the max id this node read: the range the store moved its max
      // id for ends below that max id, so no row at or above it can be that move: a refresh that
      // finds one lifts the refusal (recheck), with no restart.
      if (
        isLeafError(error, ErrorCodes.CORRUPT_DATA) ||
        isLeafError(error, ErrorCodes.TAG_EXHAUSTED)
      )
        this.refuse(b, error, taken && reasonOf(error) !== BELOW_SEEN);
      else this.loadFailed(b, error);
      return;
    }
    b.loading = false;
    if (b.removed) {
      // Closed meanwhile: never handed out, so the close can give it back.
      b.late.push(range);
      return;
    }
    const pieces = split(range, count);
    if (isStrided(range)) {
      b.strided ??= new StrideFloors();
      b.strided.accept(range);
    } else {
      b.floor = range.end;
      b.taken = range.end;
    }
    b.lastStep = pieces[0]!.step;
    b.tableStep = range.tableStep;
    b.lastLoadAt = this.clock.now();
    const endedAt = performance.now();
    b.lastLoadDurationMs = endedAt - startedAt;
    b.slowLoadMs = Math.max(
      b.lastLoadDurationMs,
      b.slowLoadMs * 0.5 ** ((endedAt - b.slowLoadAt) / SLOW_LOAD_HALF_LIFE_MS),
    );
    b.slowLoadAt = endedAt;
    // Ids handed out while this load was in flight: the ids ready ahead must cover a few such
    // loads, or the next burst of calls outruns them. Checked here, a load earlier than a switch.
    const left = b.currentLeft() + b.aheadLeft();
    if (b.initialized && this.maxDepth > 1) {
      const during = leftAtStart - left;
      if (during > 0n && left + (range.end - range.start) < BigInt(GROW_LOADS) * during) {
        b.depth = Math.min(b.depth + 1, this.maxDepth);
      }
    }
    b.loads++;
    b.consecutiveFailures = 0;
    b.retryAt = undefined;
    b.starving = false;
    b.ahead.push(...pieces);
    if (!b.initialized || b.currentEmpty()) {
      // Requests waited for this range: `starved` already judged the depth.
      b.currentSince = this.clock.now();
      if (b.initialized) b.switchesSinceLoad++;
      b.promote(b.ahead.shift()!, this.threshold);
    }
    if (b.depth > 1) this.startLoad(b);
    const waiters = b.waiters;
    b.waiters = [];
    for (const w of waiters) {
      clearTimeout(w.timer);
      w.resolve();
    }
  }

  /**
   * The floor a range of `b` is asked with: its high-water mark while that is above the ranges this
   * process took (a restarted node), so that a store with its own checks refuses a max id moved
   * back below it without moving it (the tag is then served again once the row is fixed, with no
   * restart). Nothing otherwise: the store knows this process's ranges itself, and a residue set's
   * interleaved ranges have no one floor.
   */
  private storeFloor(b: TagBuffer): bigint | undefined {
    if (this.highWater === undefined || b.strided !== undefined) return undefined;
    return b.floor > b.taken ? b.floor : undefined;
  }

  /** Throws CORRUPT_DATA when `range` is malformed or below the ranges this node took. */
  private check(b: TagBuffer, range: SegmentRange): void {
    const where = `the ${this.store.kind} store`;
    const problem = rangeProblem(range, b.tag);
    if (problem !== undefined) throw badRange(range, b.tag, problem, where);
    // Ranges of a residue set's databases interleave: each class is judged on its own.
    const residue = b.strided?.floorOf(range, b.floor) ?? (isStrided(range) ? b.floor : undefined);
    if (residue !== undefined) {
      if (range.start < residue) {
        throw maxIdMovedBack(b.tag, range.start, residue, where, { taken: true });
      }
      return;
    }
    if (range.start < b.floor) {
      throw b.floor > b.taken && this.highWater !== undefined
        ? belowHighWater(this.highWater, b.tag, range.start, b.floor, where, true)
        : maxIdMovedBack(b.tag, range.start, b.floor, where, { taken: true });
    }
  }

  /**
   * The store answered a range starting below `seen`, the highest max id this node read in the
   * tag's row: the ids below it were taken by some node, and may have been handed out (a row moved
   * back, a replica that missed writes), or were given back by a node's graceful stop; the two look
   * the same. They are not served: the part of the range at or above `seen` is, or, when the range
   * ends below it, one more range is taken covering the gap (2,147,483,647 ids at most; a gap wider
   * than that is refused). Reported to `onError` each time.
   */
  private async skipTo(
    b: TagBuffer,
    range: SegmentRange,
    seen: bigint,
    perRange: number,
  ): Promise<SegmentRange> {
    let r = range;
    // Before a tag's first range its table step is not known yet (0): the range's own tells it.
    const per = perRange > 0 ? perRange : range.tableStep;
    if (r.end <= seen) {
      const gap = seen - r.end;
      if (gap > BigInt(MAX_STEP - per)) throw belowSeen(b.tag, r.start, seen, this.highWater!);
      r = await this.store.takeRange(b.tag, Number(gap) + per, this.storeFloor(b));
      this.check(b, r);
    }
    this.report(belowSeen(b.tag, range.start, seen, this.highWater!, r.end), {
      tag: b.tag,
      operation: "load",
    });
    if (r.start >= seen) return r;
    return { ...r, start: seen, step: Number(r.end - seen) };
  }

  private loadFailed(b: TagBuffer, error: unknown): void {
    b.loadFailures++;
    b.consecutiveFailures++;
    b.lastError = error;
    // A split brain or a configuration problem (access denied, a revoked grant, a missing table)
    // needs an operator: reported at error level. Loads still retry, so a fix is picked up.
    this.report(
      error,
      reasonOf(error) === "split-brain" || isLeafError(error, ErrorCodes.INVALID_CONFIG)
        ? { tag: b.tag, operation: "load", level: "error" }
        : { tag: b.tag, operation: "load" },
    );
    if (b.removed || this.closed()) return;
    const wait = backoffDelay(b.consecutiveFailures - 1, this.retry);
    b.retryAt = performance.now() + wait;
    b.retryTimer = setTimeout(() => {
      b.retryTimer = undefined;
      this.startLoad(b);
    }, wait);
    b.retryTimer.unref?.();
    // Waiters whose deadline comes before the retry get their answer now rather than at the
    // deadline.
    b.waiters = b.waiters.filter((w) => {
      if (w.deadline >= b.retryAt!) return true;
      clearTimeout(w.timer);
      w.reject(this.exhausted(b, this.waitMs));
      return false;
    });
  }

  /**
   * Stops serving `b`: the ranges it holds are dropped (a gap), waiters fail with the reason, and
   * no load starts until a refresh finds the row fixed ({@link recheckRefused}). When the store had
   * already moved its max id for the refused range (`taken`: a store without its own checks), a
   * fixed-looking row cannot be told from that move, so the tag stays refused until a restart.
   */
  refuse(b: TagBuffer, error: LeafError, taken: boolean): void {
    b.loadFailures++;
    b.consecutiveFailures++;
    b.lastError = error;
    if (b.removed || this.closed()) {
      this.report(error, { tag: b.tag, operation: "load" });
      return;
    }
    b.refused = error;
    b.refusedUntilRestart = taken;
    // The ranges a used-up tag holds are good: served to their end. Other refusals drop them.
    if (error.code !== ErrorCodes.TAG_EXHAUSTED) b.drop();
    this.report(error, { tag: b.tag, operation: "load", refused: true, level: "error" });
    const refused = this.refusedError(b);
    for (const w of b.waiters) {
      clearTimeout(w.timer);
      w.reject(refused);
    }
    b.waiters = [];
  }

  /** The error requests of a refused tag get: CORRUPT_DATA with the reason, the cause attached. */
  refusedError(b: TagBuffer): LeafError {
    const cause = b.refused!;
    if (cause.code === ErrorCodes.TAG_EXHAUSTED) {
      return new LeafError({
        component: COMPONENT,
        code: cause.code,
        leafCode: cause.leafCode,
        message: bareMessage(cause),
        details: { ...cause.details, tag: b.tag },
        cause,
      });
    }
    return new LeafError({
      component: COMPONENT,
      code: ErrorCodes.CORRUPT_DATA,
      message:
        `tag ${JSON.stringify(b.tag)} is not served: ${bareMessage(cause)}. ` +
        (b.refusedUntilRestart
          ? `The ${this.store.kind} store moved its max id for the refused range, so ids resume only after the row is fixed and this process restarted`
          : "Ids resume once a refresh finds the row fixed"),
      details: { ...cause.details, tag: b.tag },
      cause,
    });
  }

  /** Waits until a load of `b` ends (or a range is there), rejecting with -3 at `deadline`. */
  waitForRange(b: TagBuffer, deadline: number): Promise<void> {
    if (b.refused !== undefined) return Promise.reject(this.refusedError(b));
    const left = deadline - performance.now();
    if (
      left <= 0 ||
      (b.retryTimer !== undefined && b.retryAt !== undefined && b.retryAt > deadline)
    ) {
      return Promise.reject(this.exhausted(b, this.waitMs));
    }
    return new Promise<void>((resolve, reject) => {
      const waiter: Waiter = {
        deadline,
        resolve,
        reject,
        timer: setTimeout(() => {
          const i = b.waiters.indexOf(waiter);
          if (i !== -1) b.waiters.splice(i, 1);
          reject(this.exhausted(b, this.waitMs));
        }, left),
      };
      b.waiters.push(waiter);
    });
  }

  /** SEGMENTS_EXHAUSTED (-3) for `b`, saying why no range is there. */
  exhausted(b: TagBuffer, waitedMs: number): LeafError {
    const why =
      b.lastError !== undefined && b.consecutiveFailures > 0
        ? `the last load failed (${message(b.lastError)})`
        : b.loading
          ? "the load in flight has not finished"
          : "no load has finished yet";
    return new LeafError({
      component: COMPONENT,
      code: ErrorCodes.SEGMENTS_EXHAUSTED,
      leafCode: LeafCodes.SEGMENTS_EXHAUSTED,
      message:
        `no id for tag ${JSON.stringify(b.tag)}: both ranges are used up and ${why}` +
        `${waitedMs > 0 ? ` after waiting ${waitedMs} ms` : ""}; ` +
        (isLeafError(b.lastError, ErrorCodes.INVALID_CONFIG) && b.consecutiveFailures > 0
          ? `the ${this.store.kind} store refuses this node (a configuration problem, not an outage): fix it as the cause says`
          : `the ${this.store.kind} store may be down or slow, retry shortly`),
      details: { tag: b.tag, waitedMs, loadFailures: b.loadFailures },
      cause: b.consecutiveFailures > 0 ? b.lastError : undefined,
    });
  }

  /** NOT_INITIALIZED (-1) for `b`: its first range has not arrived. */
  notInitialized(b: TagBuffer): LeafError {
    return new LeafError({
      component: COMPONENT,
      code: ErrorCodes.NOT_INITIALIZED,
      leafCode: LeafCodes.SEGMENT_NOT_INITIALIZED,
      message: `tag ${JSON.stringify(b.tag)} has no range loaded yet${b.lastError === undefined ? " (loading)" : ` (last load failed: ${message(b.lastError)})`}; use nextId() to wait for it`,
      details: { tag: b.tag },
    });
  }
}

/**
 * `range` cut into `count` ranges of equal step when it was taken as `count` steps at once; as it
 * is otherwise (a store that answered another size is checked as one range).
 */
function split(range: SegmentRange, count: number): SegmentRange[] {
  if (count <= 1 || range.step % count !== 0) return [range];
  const step = range.step / count;
  const pieces: SegmentRange[] = [];
  for (let i = 0; i < count; i++) {
    const start = range.start + BigInt(i * step);
    pieces.push({ ...range, start, end: start + BigInt(step), step });
  }
  return pieces;
}

/**
 * CORRUPT_DATA for a range of `tag` starting at `start`, below `seen`, the highest max id the node
 * read in the row: with `skippedTo` the ids below were skipped (a warning), without it the gap is
 * too wide to skip and the tag is refused.
 */
function belowSeen(
  tag: string,
  start: bigint,
  seen: bigint,
  marks: HighWaterMarks,
  skippedTo?: bigint,
): LeafError {
  return new LeafError({
    component: COMPONENT,
    code: ErrorCodes.CORRUPT_DATA,
    message:
      `tag ${JSON.stringify(tag)}: the store answered a range from ${start}, below ${seen}, the highest max id this node read in its row (remembered in ${marks.path}): ` +
      "another node gave ids back at a graceful stop, or the max id was moved back (a hand edit, a replica that missed writes) below ids other nodes may have handed out. " +
      (skippedTo !== undefined
        ? `The ids from ${start} to ${seen} are not served by this node (a gap); it serves from ${seen} (the store's max id is now ${skippedTo})`
        : `The gap is wider than one range can cover, so the tag is refused until its max id is set to at least ${seen}, or this node is told to forget its mark`),
    details: {
      tag,
      reason: BELOW_SEEN,
      maxId: start.toString(),
      seen: seen.toString(),
      highWaterFile: marks.path,
      ...(skippedTo !== undefined ? { skippedTo: skippedTo.toString() } : {}),
    },
  });
}

/** `details.reason` of a range refused below the highest max id the node read in the row. */
export const BELOW_SEEN = "below-observed-max-id";

/** `details.reason` of a LeafError, or null. */
export function reasonOf(error: unknown): string | null {
  const reason = (error as { details?: { reason?: unknown } } | undefined)?.details?.reason;
  return typeof reason === "string" ? reason : null;
}

/** The message of an error (or the value in words). */
export function message(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
