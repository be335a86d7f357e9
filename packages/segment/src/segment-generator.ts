// Segment mode's id generator: Java Leaf's SegmentIDGenImpl done in TypeScript. Tags come from the
// store at start and every refresh; each tag hands out ids from a double buffer, loading the next
// range in the background, so that an id costs no I/O and a range switch costs none either.
import { performance } from "node:perf_hooks";
import {
  argumentError,
  type BackoffOptions,
  backoffDelay,
  type Clock,
  configError,
  ErrorCodes,
  isLeafError,
  LeafCodes,
  LeafError,
  systemClock,
} from "@leaf/core";
import {
  type DynamicStep,
  type DynamicStepOptions,
  nextDynamicStep,
  resolveDynamicStep,
} from "./dynamic-step";
import { type RangeSnapshot, TagBuffer, type Waiter } from "./segment-buffer";
import type { NewTag, SegmentRange, SegmentStore, TagRecord } from "./segment-store";
import {
  badRange,
  COMPONENT,
  checkTag,
  closedError,
  isValidTag,
  MAX_ID,
  MAX_STEP,
  maxIdMovedBack,
  rangeProblem,
  unknownTag,
} from "./validation";

/** Options of {@link SegmentIdGenerator}. */
export interface SegmentGeneratorOptions {
  /** Where ranges come from: a MysqlSegmentStore, an EmbeddedSegmentStore, or any SegmentStore. */
  store: SegmentStore;
  /** How often the tag list is re-read from the store, in ms (default 60,000, as Leaf). */
  refreshIntervalMs?: number;
  /**
   * Fraction of the current range used when the next range starts loading in the background
   * (default 0.1, as Leaf: once 10% is used). 0 loads the next range as soon as one becomes current.
   */
  preloadThreshold?: number;
  /** Leaf's dynamic step; `false` always takes the table's step (default true: Leaf's settings). */
  dynamicStep?: boolean | DynamicStepOptions;
  /**
   * How long `nextId`/`nextIds` wait for a range when both are used up before failing with
   * SEGMENTS_EXHAUSTED (Leaf code -3), in ms (default 1,000). The wait is on the load, never a spin.
   */
  exhaustedWaitMs?: number;
  /** Largest `nextIds` batch (default 10,000). */
  maxBatch?: number;
  /** Delays between retries of a failed load (default: 100 ms doubling up to 5,000 ms, jittered). */
  retry?: BackoffOptions;
  /** Clock for the dynamic step and load times (default: the system clock). */
  clock?: Clock;
  /**
   * Which tags get their first range before a request asks for one: at start, when a refresh finds
   * a new tag, when the admin API creates one. `true` (default): every tag. `false`: none, as Java
   * Leaf: a tag's first range is loaded by its first request (which waits one store round trip).
   * `{ tags, updatedWithinMs }`: the tags listed, and the tags whose row changed (a range taken by
   * any process, a step changed, the tag created) within `updatedWithinMs` of now; the rest on
   * their first request. Each tag loaded and then not asked for before the next restart is one
   * range unused; with hundreds of idle tags and large steps, `true` wastes that much per restart.
   */
  loadOnStart?: boolean | EagerLoadOptions;
  /** Close the store on `close()` (default true). */
  closeStore?: boolean;
  /**
   * Told about every failed load, refresh or refused range (for logs). The generator retries failed
   * loads on its own; `refused: true` means the tag is no longer served (log it at error level): its
   * range was CORRUPT_DATA (max id moved back, stale primary, damaged row, bad range).
   */
  onError?: (error: unknown, context: GeneratorErrorContext) => void;
}

/** {@link SegmentGeneratorOptions.loadOnStart} in its selective form. */
export interface EagerLoadOptions {
  /** Tags always loaded before their first request (hot tags). Tags not in the store are ignored. */
  tags?: readonly string[];
  /**
   * Also load tags whose stored row changed within this many ms of now (the store's `updatedAt`,
   * `update_time` in MySQL: it moves with every range any process takes). A tag with no known
   * update time is loaded on its first request. Omitted: only `tags` are loaded early.
   */
  updatedWithinMs?: number;
}

/** What {@link SegmentGeneratorOptions.onError} is told besides the error. */
export interface GeneratorErrorContext {
  tag?: string;
  operation: "load" | "refresh";
  /**
   * True when the tag stops being served: its requests fail with CORRUPT_DATA and no range is taken
   * (nothing retried) until a refresh finds the tag's row fixed (max id at or above the end of every
   * range this process used, a positive step).
   */
  refused?: boolean;
  /**
   * "error" when the error needs an operator: a refused tag, or a store refusing every range
   * because more than one backing server takes writes (`details.reason` "split-brain"). Log these
   * at error level; the others are transient and retried.
   */
  level?: "error";
}

/** Monitoring view of one tag, the data of Java Leaf's `/cache` page and more. */
export interface TagSnapshot {
  tag: string;
  /** A range has been loaded (Java Leaf's `init`). */
  initialized: boolean;
  /** Which slot of `segments` is current (Java Leaf's `pos`); it flips on every range switch. */
  currentPos: 0 | 1;
  /** Java Leaf's two segments: `segments[currentPos]` is current, the other the next (null when not loaded). */
  segments: [RangeSnapshot | null, RangeSnapshot | null];
  /** The next range is loaded and ready (Java Leaf's `nextReady`). */
  nextReady: boolean;
  /** A load is in flight. */
  loading: boolean;
  /** Ids left in the current and next ranges together. */
  idsLeft: bigint;
  /** Step of the last range taken (the dynamic step). */
  step: number;
  /** The store's step for the tag, as of the last range taken (the dynamic step's floor). */
  tableStep: number;
  /** Clock time (ms since the Unix epoch) of the last successful load; null before the first. */
  lastLoadAt: number | null;
  /** How long the last successful load took, in ms. */
  lastLoadDurationMs: number | null;
  /** Successful loads. */
  loads: number;
  /** Failed loads, in total and since the last success. */
  loadFailures: number;
  consecutiveFailures: number;
  /** Message of the last failed load, or null. */
  lastError: string | null;
  /** Ms until the next retry of a failed load, or null when none is scheduled. */
  retryInMs: number | null;
  /** `details.reason` of the last failed load's error ("split-brain", ...), or null. */
  lastErrorReason: string | null;
  /**
   * Set while the tag is not served because a range was refused as CORRUPT_DATA: the reason
   * ("max-id-moved-back", "stale-primary", "bad-step", "bad-max-id", "bad-range") and the message.
   */
  refused: { reason: string; message: string } | null;
}

/** Generator-wide status. */
export interface GeneratorStatus {
  state: "new" | "starting" | "running" | "closed";
  store: string;
  tags: number;
  /** Clock time (ms) of the last successful refresh of the tag list; null before the first. */
  lastRefreshAt: number | null;
  refreshFailures: number;
  lastRefreshError: string | null;
}

/**
 * Hands out ids per tag from ranges of a {@link SegmentStore}.
 *
 * ```ts
 * const generator = new SegmentIdGenerator({ store: new MysqlSegmentStore({ url }) });
 * await generator.start();            // fails when the store cannot be reached
 * const id = generator.nextIdSync("order"); // no I/O, no await, while the range has ids
 * const ids = await generator.nextIds("order", 100);
 * await generator.close();
 * ```
 *
 * Ids of one tag increase monotonically within a process and are unique across every process
 * sharing the store. Errors are LeafErrors: NOT_INITIALIZED (-1) before `start()`, UNKNOWN_TAG (-2),
 * SEGMENTS_EXHAUSTED (-3) when both ranges are used up and no range arrives in time,
 * INVALID_ARGUMENT for a malformed tag or count, CLOSED after `close()`.
 */
export class SegmentIdGenerator {
  private readonly store: SegmentStore;
  private readonly buffers = new Map<string, TagBuffer>();
  /** Floors of tags removed by a refresh, so that a tag coming back never goes below them. */
  private readonly retired = new Map<string, bigint>();
  private readonly refreshIntervalMs: number;
  private readonly threshold: number;
  private readonly dynamic: DynamicStep | undefined;
  private readonly waitMs: number;
  private readonly maxBatch: number;
  private readonly retry: BackoffOptions;
  private readonly clock: Clock;
  /** Every tag early (true), none (false), or the ones {@link EagerLoadOptions} selects. */
  private readonly loadOnStart:
    | boolean
    | { tags: Set<string>; updatedWithinMs: number | undefined };
  private readonly closeStore: boolean;
  private readonly onError: SegmentGeneratorOptions["onError"];
  private state: GeneratorStatus["state"] = "new";
  private refreshTimer: ReturnType<typeof setTimeout> | undefined;
  private refreshing: Promise<void> | undefined;
  private starting: Promise<void> | undefined;
  private lastRefreshAt: number | null = null;
  private refreshFailures = 0;
  private lastRefreshError: unknown;
  private readonly inFlight = new Set<Promise<void>>();
  /** Counts admin changes, so that a refresh that read the tag list before one does not undo it. */
  private changeSeq = 0;
  private readonly addedAt = new Map<string, number>();
  private readonly deletedAt = new Map<string, number>();

  constructor(options: SegmentGeneratorOptions) {
    if (!options || typeof options !== "object") {
      throw configError(COMPONENT, "options", options, "an object with at least {store}");
    }
    const { store } = options;
    if (!store || typeof store.takeRange !== "function" || typeof store.listTags !== "function") {
      throw configError(
        COMPONENT,
        "store",
        store,
        "a SegmentStore (MysqlSegmentStore, EmbeddedSegmentStore, ...)",
      );
    }
    this.store = store;
    this.refreshIntervalMs = positiveInteger(
      "refreshIntervalMs",
      options.refreshIntervalMs ?? 60_000,
    );
    this.threshold = options.preloadThreshold ?? 0.1;
    if (typeof this.threshold !== "number" || !(this.threshold >= 0 && this.threshold <= 1)) {
      throw configError(
        COMPONENT,
        "preloadThreshold",
        this.threshold,
        "a fraction from 0 to 1 (default 0.1)",
      );
    }
    this.dynamic = resolveDynamicStep(options.dynamicStep);
    this.waitMs = nonNegativeInteger("exhaustedWaitMs", options.exhaustedWaitMs ?? 1_000);
    this.maxBatch = positiveInteger("maxBatch", options.maxBatch ?? 10_000);
    this.retry = { initialMs: 100, maxMs: 5_000, ...options.retry };
    this.clock = options.clock ?? systemClock;
    this.loadOnStart = eagerLoad(options.loadOnStart);
    this.closeStore = options.closeStore ?? true;
    this.onError = options.onError;
  }

  /**
   * Reads the tag list (and the first range of every tag `loadOnStart` selects), then refreshes the
   * tag list every `refreshIntervalMs`. Tags loaded on first request do not hold it up. Rejects with UNAVAILABLE when the store cannot be reached (the
   * generator can be started again). A tag whose first range fails to load is retried in the
   * background; its requests wait or fail with -3 meanwhile.
   */
  start(): Promise<void> {
    if (this.state === "closed") return Promise.reject(closedError("the segment id generator"));
    this.starting ??= this.doStart().finally(() => {
      this.starting = undefined;
    });
    return this.starting;
  }

  private async doStart(): Promise<void> {
    if (this.state !== "new") return;
    this.state = "starting";
    try {
      await this.refresh();
    } catch (cause) {
      if (this.closedNow()) throw closedError("the segment id generator (closed while starting)");
      this.state = "new";
      throw new LeafError({
        component: COMPONENT,
        code: ErrorCodes.UNAVAILABLE,
        message: `could not start: the tag list could not be read from the ${this.store.kind} store (${message(cause)}); check that it is reachable`,
        cause,
      });
    }
    const early = await this.selectEarly([...this.buffers.values()]);
    await Promise.all(early.map((b) => this.startLoad(b)));
    if (this.state !== "starting")
      throw closedError("the segment id generator (closed while starting)");
    this.state = "running";
    this.scheduleRefresh();
  }

  /**
   * The next id of `tag`, synchronously. Does no I/O and awaits nothing: it takes the next id of the
   * current range, or switches to the already loaded next range. Throws SEGMENTS_EXHAUSTED (-3) at
   * once when both ranges are used up (it cannot wait: use `nextId`), NOT_INITIALIZED (-1) before
   * `start()` or before the tag's first range arrived, UNKNOWN_TAG (-2), INVALID_ARGUMENT, CLOSED.
   */
  nextIdSync(tag: string): bigint {
    const b = this.buffers.get(tag);
    if (b !== undefined) {
      const v = b.value;
      if (v < b.limit) {
        b.value = v + 1;
        if (v >= b.preloadAt) this.preload(b);
        return BigInt(v);
      }
    }
    const buffer = this.lookup(tag);
    const id = this.take(buffer);
    if (id !== undefined) return id;
    if (buffer.refused !== undefined) throw this.refusedError(buffer);
    throw buffer.initialized ? this.exhausted(buffer, 0) : this.notInitialized(buffer);
  }

  /**
   * The next id of `tag`. Resolves at once (no I/O) while a range has ids; when both ranges are used
   * up, waits for the load in flight up to `exhaustedWaitMs`, then rejects with SEGMENTS_EXHAUSTED
   * (-3). Other errors as {@link nextIdSync}.
   */
  nextId(tag: string): Promise<bigint> {
    const b = this.buffers.get(tag);
    if (b !== undefined) {
      const v = b.value;
      if (v < b.limit) {
        b.value = v + 1;
        if (v >= b.preloadAt) this.preload(b);
        return Promise.resolve(BigInt(v));
      }
    }
    return this.nextIdWaiting(tag);
  }

  /**
   * `count` consecutive ids of `tag` (1 .. maxBatch), spanning ranges when needed, in increasing
   * order. Waits for loads as {@link nextId}; when it fails part-way, the ids already taken are
   * not handed out (a gap, never a duplicate).
   */
  async nextIds(tag: string, count: number): Promise<bigint[]> {
    if (!Number.isInteger(count) || count < 1 || count > this.maxBatch) {
      throw argumentError(COMPONENT, "count", count, `an integer from 1 to ${this.maxBatch}`);
    }
    const ids = new Array<bigint>(count);
    let n = 0;
    while (n < count) {
      const b = this.lookup(tag);
      if (!b.big) {
        const take = Math.min(count - n, b.limit - b.value);
        if (take > 0) {
          const first = b.value;
          for (let k = 0; k < take; k++) ids[n++] = BigInt(first + k);
          b.value = first + take;
          if (b.value - 1 >= b.preloadAt) this.preload(b);
          continue;
        }
      }
      const id = this.take(b);
      if (id !== undefined) {
        ids[n++] = id;
        continue;
      }
      await this.waitForRange(b, performance.now() + this.waitMs);
    }
    return ids;
  }

  /** Tags the generator serves now (as of the last refresh or admin change). */
  tags(): string[] {
    return [...this.buffers.keys()];
  }

  /** Monitoring view of `tag`, or undefined when the generator does not serve it. */
  snapshot(tag: string): TagSnapshot | undefined {
    const b = this.buffers.get(tag);
    return b === undefined ? undefined : this.snapshotOf(b);
  }

  /** Monitoring views of every tag, ordered by tag. */
  snapshots(): TagSnapshot[] {
    return [...this.buffers.keys()].sort().map((tag) => this.snapshotOf(this.buffers.get(tag)!));
  }

  /** Generator-wide state, tag count and refresh health. */
  status(): GeneratorStatus {
    return {
      state: this.state,
      store: this.store.kind,
      tags: this.buffers.size,
      lastRefreshAt: this.lastRefreshAt,
      refreshFailures: this.refreshFailures,
      lastRefreshError: this.lastRefreshError === undefined ? null : message(this.lastRefreshError),
    };
  }

  /**
   * Re-reads the tag list now: new tags are added (and loaded when `loadOnStart` selects them), tags no longer
   * in the store are dropped, also when the store has none left. Rejects when the store cannot be
   * reached; the tags served stay as they were.
   */
  async refresh(): Promise<void> {
    if (this.state === "closed") throw closedError("the segment id generator");
    this.refreshing ??= this.doRefresh().finally(() => {
      this.refreshing = undefined;
    });
    return this.refreshing;
  }

  /** Creates a tag in the store (admin API) and serves it at once. */
  async createTag(tag: NewTag): Promise<TagRecord> {
    this.checkUsable();
    const record = await this.store.createTag(tag);
    this.changeSeq++;
    this.deletedAt.delete(record.tag);
    if (this.state !== "closed" && !this.buffers.has(record.tag)) {
      const b = this.addBuffer(record.tag);
      if (this.selects(record)) this.startLoad(b);
    }
    return record;
  }

  /**
   * Changes a tag's step in the store (admin API). The generator uses it from the next range on
   * (the range loaded already keeps its size); with the dynamic step it is the new floor.
   */
  async updateStep(tag: string, step: number): Promise<TagRecord> {
    this.checkUsable();
    return this.store.updateStep(tag, step);
  }

  /** Deletes a tag from the store (admin API) and stops serving it. */
  async deleteTag(tag: string): Promise<boolean> {
    this.checkUsable();
    const deleted = await this.store.deleteTag(tag);
    this.deletedAt.set(tag, ++this.changeSeq);
    const b = this.buffers.get(tag);
    if (b) this.removeBuffer(b);
    return deleted;
  }

  /** Names of the tags in the store now (admin API); `tags()` gives the ones served. */
  async listTags(): Promise<string[]> {
    this.checkUsable();
    return this.store.listTags();
  }

  /** Every stored tag with its max id and step (admin API, Java Leaf's `/db` page). */
  async describeTags(): Promise<TagRecord[]> {
    this.checkUsable();
    return this.store.describeTags();
  }

  /**
   * Stops refreshing and loading, fails pending waits with CLOSED, waits for loads in flight and
   * closes the store (unless `closeStore: false`). Idempotent.
   */
  async close(): Promise<void> {
    if (this.state === "closed") return;
    this.state = "closed";
    if (this.refreshTimer) clearTimeout(this.refreshTimer);
    for (const b of [...this.buffers.values()])
      this.removeBuffer(b, closedError("the segment id generator"));
    await Promise.allSettled([...this.inFlight, this.refreshing]);
    if (this.closeStore) await this.store.close();
  }

  // ---- internals -------------------------------------------------------------------------------

  private async nextIdWaiting(tag: string): Promise<bigint> {
    for (;;) {
      const b = this.lookup(tag);
      const id = this.take(b);
      if (id !== undefined) return id;
      await this.waitForRange(b, performance.now() + this.waitMs);
    }
  }

  /** The buffer of `tag`, or the error that explains why there is none. */
  private lookup(tag: string): TagBuffer {
    const b = this.buffers.get(tag);
    if (b !== undefined) return b;
    if (this.state === "closed") throw closedError("the segment id generator");
    if (this.state !== "running") {
      throw new LeafError({
        component: COMPONENT,
        code: ErrorCodes.NOT_INITIALIZED,
        leafCode: LeafCodes.SEGMENT_NOT_INITIALIZED,
        message: `the generator is not started (state ${this.state}); await start() before asking for ids`,
        details: { state: this.state },
      });
    }
    checkTag(tag);
    throw unknownTag(tag, `the ${this.store.kind} store (as of the last refresh)`);
  }

  /**
   * Takes one id from the current range, switching to the next range when the current one is used
   * up. No I/O: when no range has ids it starts a load and answers undefined.
   */
  private take(b: TagBuffer): bigint | undefined {
    for (;;) {
      if (b.big) {
        const v = b.bigValue;
        if (v < b.end) {
          b.bigValue = v + 1n;
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
      if (b.next === undefined) {
        this.startLoad(b);
        return undefined;
      }
      b.promote(b.next, this.threshold);
    }
  }

  /** The preload point was reached: load the next range unless one is loaded or loading. */
  private preload(b: TagBuffer): void {
    b.disarm();
    this.startLoad(b);
  }

  /** Starts the one background load of `b` unless it has a next range, a load, or a retry pending. */
  private startLoad(b: TagBuffer): Promise<void> | undefined {
    if (
      b.removed ||
      b.refused !== undefined ||
      b.loading ||
      b.next !== undefined ||
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
    const now = this.clock.now();
    // As Java Leaf: the first two ranges take the table's step. Its buffer's updateTimestamp stays 0
    // through the first load and is set by the second, so the dynamic step starts with the third
    // range, measured from the second load (ranges of a busy tag: 2000, 2000, 4000, ...).
    const step =
      this.dynamic === undefined || b.loads < 2 || b.lastLoadAt === undefined
        ? undefined
        : nextDynamicStep(b.lastStep, b.tableStep, now - b.lastLoadAt, this.dynamic);
    let range: SegmentRange;
    // The store handed over a range the generator itself refuses: the store moved its max id for it.
    let taken = false;
    try {
      range = await this.store.takeRange(b.tag, step);
      taken = true;
      const where = `the ${this.store.kind} store`;
      const problem = rangeProblem(range, b.tag);
      if (problem !== undefined) throw badRange(range, b.tag, problem, where);
      if (range.start < b.floor) {
        throw maxIdMovedBack(b.tag, range.start, b.floor, where, { taken: true });
      }
    } catch (error) {
      b.loading = false;
      // A damaged row or a max id behind this process's ids is not retried: each retry could move
      // max_id on, into ranges other processes hold. The tag waits for an operator.
      if (isLeafError(error, ErrorCodes.CORRUPT_DATA)) this.refuse(b, error, taken);
      else this.loadFailed(b, error);
      return;
    }
    b.loading = false;
    if (b.removed) return;
    b.floor = range.end;
    b.lastStep = range.step;
    b.tableStep = range.tableStep;
    b.lastLoadAt = this.clock.now();
    b.lastLoadDurationMs = performance.now() - startedAt;
    b.loads++;
    b.consecutiveFailures = 0;
    b.retryAt = undefined;
    if (b.initialized && !b.currentEmpty()) {
      b.next = range;
    } else {
      b.promote(range, this.threshold);
    }
    const waiters = b.waiters;
    b.waiters = [];
    for (const w of waiters) {
      clearTimeout(w.timer);
      w.resolve();
    }
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
    if (b.removed || this.state === "closed") return;
    const wait = backoffDelay(b.consecutiveFailures - 1, this.retry);
    b.retryAt = performance.now() + wait;
    b.retryTimer = setTimeout(() => {
      b.retryTimer = undefined;
      if (b.next === undefined) this.startLoad(b);
    }, wait);
    b.retryTimer.unref?.();
    // Waiters whose deadline comes before the retry get their answer now rather than at the deadline.
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
  private refuse(b: TagBuffer, error: LeafError, taken: boolean): void {
    b.loadFailures++;
    b.consecutiveFailures++;
    b.lastError = error;
    if (b.removed || this.state === "closed") {
      this.report(error, { tag: b.tag, operation: "load" });
      return;
    }
    b.refused = error;
    b.refusedUntilRestart = taken;
    b.drop();
    this.report(error, { tag: b.tag, operation: "load", refused: true, level: "error" });
    const refused = this.refusedError(b);
    for (const w of b.waiters) {
      clearTimeout(w.timer);
      w.reject(refused);
    }
    b.waiters = [];
  }

  /** The error requests of a refused tag get: CORRUPT_DATA with the reason, the cause attached. */
  private refusedError(b: TagBuffer): LeafError {
    const cause = b.refused!;
    return new LeafError({
      component: COMPONENT,
      code: ErrorCodes.CORRUPT_DATA,
      message:
        `tag ${JSON.stringify(b.tag)} is not served: ${cause.message.replace(/^\[leaf\] \[[a-z-]+\] /, "")}. ` +
        (b.refusedUntilRestart
          ? `The ${this.store.kind} store moved its max id for the refused range, so ids resume only after the row is fixed and this process restarted`
          : "Ids resume once a refresh finds the row fixed"),
      details: { ...cause.details, tag: b.tag },
      cause,
    });
  }

  /**
   * At each refresh, a refused tag whose row now has a sane step and a max id at or above the end of
   * every range this process used is served again (from a new range).
   */
  private async recheckRefused(): Promise<void> {
    const refused = [...this.buffers.values()].filter(
      (b) => b.refused !== undefined && !b.refusedUntilRestart,
    );
    if (refused.length === 0) return;
    let records: TagRecord[];
    try {
      records = await this.store.describeTags();
    } catch (error) {
      this.report(error, { operation: "refresh" });
      return;
    }
    const byTag = new Map(records.map((r) => [r.tag, r]));
    for (const b of refused) {
      const row = byTag.get(b.tag);
      if (row === undefined || b.removed || b.refused === undefined) continue;
      const sane =
        Number.isInteger(row.step) &&
        row.step >= 1 &&
        row.step <= MAX_STEP &&
        row.maxId >= b.floor &&
        row.maxId <= MAX_ID;
      if (!sane) continue;
      b.refused = undefined;
      b.consecutiveFailures = 0;
      if (this.loadOnStart === true || b.initialized) this.startLoad(b);
    }
  }

  /** Waits until a load of `b` ends (or a range is there), rejecting with -3 at `deadline`. */
  private waitForRange(b: TagBuffer, deadline: number): Promise<void> {
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

  private exhausted(b: TagBuffer, waitedMs: number): LeafError {
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

  private notInitialized(b: TagBuffer): LeafError {
    return new LeafError({
      component: COMPONENT,
      code: ErrorCodes.NOT_INITIALIZED,
      leafCode: LeafCodes.SEGMENT_NOT_INITIALIZED,
      message: `tag ${JSON.stringify(b.tag)} has no range loaded yet${b.lastError === undefined ? " (loading)" : ` (last load failed: ${message(b.lastError)})`}; use nextId() to wait for it`,
      details: { tag: b.tag },
    });
  }

  private async doRefresh(): Promise<void> {
    const seq = this.changeSeq;
    let tags: string[];
    try {
      tags = await this.store.listTags();
    } catch (error) {
      this.refreshFailures++;
      this.lastRefreshError = error;
      this.report(error, { operation: "refresh" });
      throw error;
    }
    if (this.state === "closed") return;
    const present = new Set(tags);
    const added: TagBuffer[] = [];
    for (const tag of tags) {
      // A tag deleted through this generator after the list was read stays deleted.
      if (this.buffers.has(tag) || (this.deletedAt.get(tag) ?? -1) > seq) continue;
      added.push(this.addBuffer(tag));
    }
    for (const b of [...this.buffers.values()]) {
      // A tag created through this generator after the list was read stays served.
      if (!present.has(b.tag) && (this.addedAt.get(b.tag) ?? -1) <= seq) this.removeBuffer(b);
    }
    this.deletedAt.clear();
    for (const [tag, at] of this.addedAt) if (at <= seq) this.addedAt.delete(tag);
    // At start, start() loads the tags selected (and waits for them); later, the refresh does.
    if (this.state === "running" && added.length > 0) {
      for (const b of await this.selectEarly(added)) this.startLoad(b);
    }
    await this.recheckRefused();
    this.lastRefreshAt = this.clock.now();
    this.lastRefreshError = undefined;
  }

  /** True when `loadOnStart` selects the tag of `record` for an early first range. */
  private selects(record: TagRecord): boolean {
    const policy = this.loadOnStart;
    if (typeof policy === "boolean") return policy;
    if (policy.tags.has(record.tag)) return true;
    return (
      policy.updatedWithinMs !== undefined &&
      record.updatedAt !== null &&
      this.clock.now() - record.updatedAt <= policy.updatedWithinMs
    );
  }

  /**
   * The buffers among `buffers` whose first range is loaded before a request asks for it. The
   * recent-update rule reads the rows (one `describeTags`); when that fails, only the tags named
   * in `loadOnStart.tags` are loaded early and the rest wait for their first request.
   */
  private async selectEarly(buffers: TagBuffer[]): Promise<TagBuffer[]> {
    const policy = this.loadOnStart;
    if (typeof policy === "boolean") return policy ? buffers : [];
    if (policy.updatedWithinMs === undefined) return buffers.filter((b) => policy.tags.has(b.tag));
    let records: TagRecord[];
    try {
      records = await this.store.describeTags();
    } catch (error) {
      this.report(error, { operation: "refresh" });
      return buffers.filter((b) => policy.tags.has(b.tag));
    }
    const byTag = new Map(records.map((r) => [r.tag, r]));
    return buffers.filter((b) => {
      const record = byTag.get(b.tag);
      return record === undefined ? policy.tags.has(b.tag) : this.selects(record);
    });
  }

  private scheduleRefresh(): void {
    this.refreshTimer = setTimeout(() => {
      this.refresh()
        .catch(() => {
          // Counted in status(); the tags served stay as they were until a refresh succeeds.
        })
        .finally(() => {
          if (this.state === "running") this.scheduleRefresh();
        });
    }, this.refreshIntervalMs);
    this.refreshTimer.unref?.();
  }

  private addBuffer(tag: string): TagBuffer {
    const b = new TagBuffer(tag, this.retired.get(tag) ?? 0n);
    this.addedAt.set(tag, this.changeSeq);
    this.retired.delete(tag);
    this.buffers.set(tag, b);
    return b;
  }

  private removeBuffer(b: TagBuffer, reason?: LeafError): void {
    b.removed = true;
    if (b.retryTimer) clearTimeout(b.retryTimer);
    b.retryTimer = undefined;
    this.buffers.delete(b.tag);
    if (b.floor > 0n) this.retired.set(b.tag, b.floor);
    const error = reason ?? unknownTag(b.tag, `the ${this.store.kind} store (removed at refresh)`);
    for (const w of b.waiters) {
      clearTimeout(w.timer);
      w.reject(error);
    }
    b.waiters = [];
  }

  /** Passes an error to `onError`; a throwing handler must not break loading. */
  private report(error: unknown, context: GeneratorErrorContext): void {
    try {
      this.onError?.(error, context);
    } catch {
      // The handler's own failure is not the generator's to handle.
    }
  }

  /** Reads the state afresh (TypeScript narrows `this.state` across awaits). */
  private closedNow(): boolean {
    return this.state === "closed";
  }

  private checkUsable(): void {
    if (this.state === "closed") throw closedError("the segment id generator");
  }

  private snapshotOf(b: TagBuffer): TagSnapshot {
    const current = b.currentSnapshot();
    const next: RangeSnapshot | null = b.next
      ? { value: b.next.start, max: b.next.end, step: b.next.step }
      : null;
    const segments: [RangeSnapshot | null, RangeSnapshot | null] =
      b.pos === 0 ? [current, next] : [next, current];
    return {
      tag: b.tag,
      initialized: b.initialized,
      currentPos: b.pos,
      segments,
      nextReady: b.next !== undefined,
      loading: b.loading,
      idsLeft: b.currentLeft() + (b.next ? b.next.end - b.next.start : 0n),
      step: b.lastStep,
      tableStep: b.tableStep,
      lastLoadAt: b.lastLoadAt ?? null,
      lastLoadDurationMs: b.lastLoadDurationMs ?? null,
      loads: b.loads,
      loadFailures: b.loadFailures,
      consecutiveFailures: b.consecutiveFailures,
      lastError: b.lastError === undefined ? null : message(b.lastError),
      retryInMs:
        b.retryTimer !== undefined && b.retryAt !== undefined
          ? Math.max(0, Math.round(b.retryAt - performance.now()))
          : null,
      lastErrorReason: b.consecutiveFailures > 0 ? reasonOf(b.lastError) : null,
      refused:
        b.refused === undefined
          ? null
          : { reason: reasonOf(b.refused) ?? "corrupt-data", message: b.refused.message },
    };
  }
}

/** Checks `loadOnStart` and gives it the shape the generator keeps. */
function eagerLoad(
  option: SegmentGeneratorOptions["loadOnStart"],
): boolean | { tags: Set<string>; updatedWithinMs: number | undefined } {
  if (option === undefined) return true;
  if (typeof option === "boolean") return option;
  const expected = "true, false or { tags?: string[], updatedWithinMs?: number }";
  if (option === null || typeof option !== "object") {
    throw configError(COMPONENT, "loadOnStart", option, expected);
  }
  const { tags = [], updatedWithinMs } = option;
  if (!Array.isArray(tags))
    throw configError(COMPONENT, "loadOnStart.tags", tags, "an array of tags");
  for (const tag of tags) {
    if (!isValidTag(tag)) {
      throw configError(
        COMPONENT,
        "loadOnStart.tags",
        tag,
        "tags of 1 to 128 characters, no control characters",
      );
    }
  }
  if (
    updatedWithinMs !== undefined &&
    (!Number.isSafeInteger(updatedWithinMs) || updatedWithinMs < 0)
  ) {
    throw configError(
      COMPONENT,
      "loadOnStart.updatedWithinMs",
      updatedWithinMs,
      "an integer number of ms, 0 or more",
    );
  }
  return { tags: new Set(tags), updatedWithinMs };
}

function reasonOf(error: unknown): string | null {
  const reason = (error as { details?: { reason?: unknown } } | undefined)?.details?.reason;
  return typeof reason === "string" ? reason : null;
}

function message(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

function positiveInteger(key: string, value: number): number {
  if (!Number.isInteger(value) || value < 1)
    throw configError(COMPONENT, key, value, "a positive integer");
  return value;
}

function nonNegativeInteger(key: string, value: number): number {
  if (!Number.isInteger(value) || value < 0)
    throw configError(COMPONENT, key, value, "an integer of 0 or more");
  return value;
}
