// Segment mode's id generator: Java Leaf's SegmentIDGenImpl done in TypeScript. Tags come from the
// store at start and every refresh; each tag hands out ids from a double buffer, loading the next
// range in the background, so that an id costs no I/O and a range switch costs none either.
// The loading itself is in tag-loader.ts, the options in generator-options.ts, the monitoring views
// in tag-snapshot.ts; what stays here is the tag list and the request path.
import { performance } from "node:perf_hooks";
import {
  argumentError,
  type Clock,
  configError,
  ErrorCodes,
  LeafCodes,
  LeafError,
  toSafeNumber,
} from "@leaf/core";
import {
  type EagerPolicy,
  type GeneratorErrorContext,
  resolveGeneratorOptions,
  type SegmentGeneratorOptions,
} from "./generator-options";
import { type GiveBackOutcome, giveBackAll } from "./give-back";
import { belowHighWater, HighWaterMarks } from "./high-water";
import type { StrideFloors } from "./residue-range";
import { TagBuffer } from "./segment-buffer";
import type { NewTag, SegmentStore, TagRecord } from "./segment-store";
import { BELOW_SEEN, message, reasonOf, TagLoader } from "./tag-loader";
import { type GeneratorStatus, snapshotOf, type TagSnapshot } from "./tag-snapshot";
import { COMPONENT, checkTag, closedError, MAX_ID, MAX_STEP, unknownTag } from "./validation";

export type {
  EagerLoadOptions,
  GeneratorErrorContext,
  PrefetchOptions,
  SegmentGeneratorOptions,
} from "./generator-options";
export type { GiveBackOutcome } from "./give-back";
export type { GeneratorStatus, TagSnapshot } from "./tag-snapshot";

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
 * sharing the store. Errors are LeafErrors: NOT_INITIALIZED (-1) before `start()`, UNKNOWN_TAG
 * (-2), SEGMENTS_EXHAUSTED (-3) when both ranges are used up and no range arrives in time,
 * TAG_EXHAUSTED (-3, at once, permanent) once the ranges held are used up and no range of the tag's
 * step fits below 2^63 - 1, INVALID_ARGUMENT for a malformed tag or count, CLOSED after `close()`.
 */
export class SegmentIdGenerator {
  private readonly store: SegmentStore;
  private readonly buffers = new Map<string, TagBuffer>();
  /** The buffer of the tag `nextNumberSync` served last (skips the map while one tag is hot). */
  private hot: TagBuffer | undefined;
  /** Floors of tags removed by a refresh, so that a tag coming back never goes below them. */
  private readonly retired = new Map<string, bigint>();
  /** The same for the strided ranges (a residue set's) of the tags removed. */
  private readonly retiredStrided = new Map<string, StrideFloors>();
  private readonly refreshIntervalMs: number;
  private readonly waitMs: number;
  private readonly maxBatch: number;
  private readonly clock: Clock;
  /** Every tag early (true), none (false), or the ones {@link EagerLoadOptions} selects. */
  private readonly loadOnStart: EagerPolicy;
  private readonly closeStore: boolean;
  private readonly onError: SegmentGeneratorOptions["onError"];
  private readonly loader: TagLoader;
  private readonly giveBackOnClose: boolean;
  /** The node's stored high-water marks (option `highWater`), read at start. */
  private readonly highWater: HighWaterMarks | undefined;
  private givenBack: GiveBackOutcome[] = [];
  private state: GeneratorStatus["state"] = "new";
  private refreshTimer: ReturnType<typeof setTimeout> | undefined;
  private refreshing: Promise<void> | undefined;
  private starting: Promise<void> | undefined;
  private lastRefreshAt: number | null = null;
  private refreshFailures = 0;
  private lastRefreshError: unknown;
  /** Counts admin changes, so that a refresh that read the tag list before one does not undo it. */
  private changeSeq = 0;
  private readonly addedAt = new Map<string, number>();
  private readonly deletedAt = new Map<string, number>();

  constructor(options: SegmentGeneratorOptions) {
    const settings = resolveGeneratorOptions(options);
    if (settings.highWater !== undefined && settings.store.stridedRanges === true) {
      throw configError(
        COMPONENT,
        "highWater",
        "set",
        `no highWater with the ${settings.store.kind} store: its ranges come from several databases whose ids interleave, which one mark per tag cannot judge (each database is judged by the store itself)`,
      );
    }
    this.store = settings.store;
    this.refreshIntervalMs = settings.refreshIntervalMs;
    this.waitMs = settings.waitMs;
    this.maxBatch = settings.maxBatch;
    this.clock = settings.clock;
    this.loadOnStart = settings.loadOnStart;
    this.closeStore = settings.closeStore;
    this.onError = settings.onError;
    this.highWater = settings.highWater && new HighWaterMarks(settings.highWater);
    this.loader = new TagLoader({
      store: settings.store,
      threshold: settings.threshold,
      dynamic: settings.dynamic,
      waitMs: settings.waitMs,
      retry: settings.retry,
      clock: settings.clock,
      report: (error, context) => this.report(error, context),
      closed: () => this.state === "closed",
      maxDepth: settings.maxDepth,
      highWater: this.highWater,
    });
    this.giveBackOnClose = settings.giveBackOnClose;
  }

  /**
   * Reads the tag list (and the first range of every tag `loadOnStart` selects), then refreshes the
   * tag list every `refreshIntervalMs`. Tags loaded on first request do not hold it up. Rejects
   * with UNAVAILABLE when the store cannot be reached (the generator can be started again). A tag
   * whose first range fails to load is retried in the background; its requests wait or fail with -3
   * meanwhile.
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
      await this.store.start?.();
      await this.highWater?.open();
    } catch (error) {
      this.state = "new";
      throw error;
    }
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
    await Promise.all(early.map((b) => this.loader.startLoad(b)));
    if (this.state !== "starting")
      throw closedError("the segment id generator (closed while starting)");
    this.state = "running";
    this.scheduleRefresh();
  }

  /**
   * The next id of `tag`, synchronously. Does no I/O and awaits nothing: it takes the next id of
   * the current range, or switches to the already loaded next range. Throws SEGMENTS_EXHAUSTED (-3)
   * at once when both ranges are used up (it cannot wait: use `nextId`), NOT_INITIALIZED (-1)
   * before `start()` or before the tag's first range arrived, UNKNOWN_TAG (-2), INVALID_ARGUMENT,
   * CLOSED.
   */
  nextIdSync(tag: string): bigint {
    const b = this.buffers.get(tag);
    if (b !== undefined) {
      const v = b.value;
      if (v < b.fastEnd) {
        b.value = v + 1;
        return BigInt(v);
      }
    }
    // The preload point, a range switch, a range counted in bigint, or an error.
    const buffer = this.lookup(tag);
    const id = this.loader.take(buffer);
    if (id !== undefined) return id;
    if (buffer.refused !== undefined) throw this.loader.refusedError(buffer);
    throw buffer.initialized
      ? this.loader.exhausted(buffer, 0)
      : this.loader.notInitialized(buffer);
  }

  /**
   * The next id of `tag`. Resolves at once (no I/O) while a range has ids; when both ranges are
   * used up, waits for the load in flight up to `exhaustedWaitMs`, then rejects with
   * SEGMENTS_EXHAUSTED (-3). Other errors as {@link nextIdSync}.
   */
  nextId(tag: string): Promise<bigint> {
    const b = this.buffers.get(tag);
    if (b !== undefined) {
      const v = b.value;
      if (v < b.fastEnd) {
        b.value = v + 1;
        return Promise.resolve(BigInt(v));
      }
    }
    return this.nextIdWaiting(tag);
  }

  /**
   * {@link nextIdSync} as a JS number, while the tag's ids are at most 2^53 - 1
   * (Number.MAX_SAFE_INTEGER): exact, and without making a bigint on the fast path. An id above
   * that is not handed out: UNSAFE_INTEGER, never a rounded id (that id is skipped; use
   * `nextIdSync` for the tag from then on). Other errors as {@link nextIdSync}.
   */
  nextNumberSync(tag: string): number {
    // A removed buffer has fastEnd 0, so it is never served from here.
    const b = this.hot;
    if (b !== undefined && b.tag === tag) {
      // A range counted in numbers ends at or below 2^53, so v is at most 2^53 - 1.
      const v = b.value;
      if (v < b.fastEnd) {
        b.value = v + 1;
        return v;
      }
    }
    return this.nextNumberSlow(tag);
  }

  /** Everything `nextNumberSync`'s fast path leaves: kept apart so that the fast path inlines. */
  private nextNumberSlow(tag: string): number {
    this.hot = this.buffers.get(tag);
    return toSafeNumber(
      this.nextIdSync(tag),
      COMPONENT,
      `tag ${JSON.stringify(tag)}`,
      "nextIdSync",
    );
  }

  /**
   * {@link nextId} as a JS number: resolves as it does while the tag's ids are at most 2^53 - 1;
   * rejects with UNSAFE_INTEGER for an id above that (skipped, never rounded). Other errors as
   * {@link nextId}.
   */
  nextNumber(tag: string): Promise<number> {
    const b = this.buffers.get(tag);
    if (b !== undefined) {
      const v = b.value;
      if (v < b.fastEnd) {
        b.value = v + 1;
        return Promise.resolve(v);
      }
    }
    return this.nextId(tag).then((id) =>
      toSafeNumber(id, COMPONENT, `tag ${JSON.stringify(tag)}`, "nextId"),
    );
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
          if (b.value - 1 >= b.preloadAt) this.loader.preload(b);
          continue;
        }
      }
      const id = this.loader.take(b);
      if (id !== undefined) {
        ids[n++] = id;
        continue;
      }
      await this.loader.waitForRange(b, performance.now() + this.waitMs);
    }
    return ids;
  }

  /**
   * Up to `count` consecutive ids of `tag` (1 .. 2^31-1) as one half-open range `[start, end)`,
   * taken from the current range of the double buffer: no I/O while it has ids. The range is cut
   * where the current range ends, so it may hold fewer than `count` ids (at least one); ask again
   * for the rest. Waits for a range as {@link nextId} when both are used up; errors as {@link
   * nextId}. For clients that hand the ids out themselves (`@leaf/client`). With a store over a
   * residue set (ranges of one residue class, whose ids are not consecutive) each answer holds one
   * id.
   */
  async nextRange(tag: string, count: number): Promise<{ start: bigint; end: bigint }> {
    if (!Number.isInteger(count) || count < 1 || count > MAX_STEP) {
      throw argumentError(COMPONENT, "count", count, `an integer from 1 to ${MAX_STEP}`);
    }
    for (;;) {
      const b = this.lookup(tag);
      // The first id through take() switches to the next range when the current one is used up.
      const first = this.loader.take(b);
      if (first === undefined) {
        await this.loader.waitForRange(b, performance.now() + this.waitMs);
        continue;
      }
      let end: bigint;
      if (b.stride > 1n) {
        // A range of one residue class: its ids are not consecutive, so one id per answer.
        end = first + 1n;
      } else if (b.big) {
        end = first + 1n + BigInt(count - 1);
        if (end > b.end) end = b.end;
        b.bigValue = end;
        if (b.bigArmed && end - 1n >= b.bigPreloadAt) this.loader.preload(b);
      } else {
        const stop = Math.min(b.value + count - 1, b.limit);
        b.value = stop;
        if (stop - 1 >= b.preloadAt) this.loader.preload(b);
        end = BigInt(stop);
      }
      return { start: first, end };
    }
  }

  /** Tags the generator serves now (as of the last refresh or admin change). */
  tags(): string[] {
    return [...this.buffers.keys()];
  }

  /** Monitoring view of `tag`, or undefined when the generator does not serve it. */
  snapshot(tag: string): TagSnapshot | undefined {
    const b = this.buffers.get(tag);
    return b === undefined ? undefined : snapshotOf(b);
  }

  /** Monitoring views of every tag, ordered by tag. */
  snapshots(): TagSnapshot[] {
    return [...this.buffers.keys()].sort().map((tag) => snapshotOf(this.buffers.get(tag)!));
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
   * Re-reads the tag list now: new tags are added (and loaded when `loadOnStart` selects them),
   * tags no longer in the store are dropped, also when the store has none left. Rejects when the
   * store cannot be reached; the tags served stay as they were.
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
      if (record.maxId < b.floor && b.floor > b.taken) this.refuseBelowMark(b, record.maxId);
      else if (this.selects(record)) this.loader.startLoad(b);
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

  /**
   * Deletes a tag from the store (admin API) and stops serving it; answers the store's record of
   * the tag as deleted (its final max id), undefined when there was none.
   */
  async deleteTag(tag: string): Promise<TagRecord | undefined> {
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
   * Stops refreshing and loading, fails pending waits with CLOSED, waits for loads in flight, gives
   * the ids it holds and never handed out back to the store (`giveBackOnClose`: when no range was
   * taken after its own; see {@link giveBackReport}) and closes the store (unless `closeStore:
   * false`). Idempotent.
   */
  async close(): Promise<void> {
    if (this.state === "closed") return;
    this.state = "closed";
    if (this.refreshTimer) clearTimeout(this.refreshTimer);
    // In this same synchronous step every tag stops serving: from here on no id is handed out, so
    // each buffer's position is exactly where the ids handed out end.
    const held = [...this.buffers.values()];
    for (const b of held) this.removeBuffer(b, closedError("the segment id generator"));
    await Promise.allSettled([...this.loader.inFlight, this.refreshing]);
    if (this.giveBackOnClose) {
      const marks = this.highWater;
      // The mark comes down to one past the highest id this node handed out: the position in its
      // current range (ranges ahead were never served), not the start of the ids given back. Two
      // nodes stopping together can chain their give-backs (the one holding the later range first,
      // then the one whose range ends where that began), and a mark left at the first one's `from`
      // would then stand above the store's max id and refuse the tag at its next start.
      // A range loaded and never served counts for nothing: a node that started, loaded a range
      // and stopped without serving from it lowers its mark to where it stood before.
      const handedOut = new Map(held.map((b) => [b.tag, b.handedOutEnd()] as const));
      this.givenBack = await giveBackAll(
        this.store,
        held,
        marks && ((tag, from, end) => marks.lower(tag, from, end, handedOut.get(tag))),
      );
    }
    await this.highWater?.close();
    if (this.closeStore) await this.store.close();
  }

  /**
   * The node's stored high-water marks (option `highWater`): per tag, the end of the highest range
   * this node took from the store, as kept on disk. Empty without the option.
   */
  highWaterMarks(): ReadonlyMap<string, bigint> {
    return this.highWater?.all() ?? new Map();
  }

  /**
   * Per tag, the highest max id this node read in the store's rows at a refresh (option
   * `highWater`): no range is served below it. Empty without the option.
   */
  observedMaxIds(): ReadonlyMap<string, bigint> {
    return this.highWater?.allSeen() ?? new Map();
  }

  /**
   * Forgets the stored high-water mark of `tag` (an operator's call: the tag's max id is known to
   * be right, or the store is another one with its own ids), durably, and serves a tag refused for
   * it again once its row has a sane step (ranges this process took since it started still count).
   * Resolves with the mark forgotten, or undefined when there was none.
   */
  async forgetHighWater(tag: string): Promise<bigint | undefined> {
    this.checkUsable();
    checkTag(tag);
    if (this.highWater === undefined) return undefined;
    const mark = await this.highWater.forget(tag);
    const b = this.buffers.get(tag);
    if (b !== undefined) b.floor = b.taken;
    if (mark !== undefined && b?.refused !== undefined && this.state === "running") {
      b.refusedUntilRestart = false;
      await this.recheckRefused();
    }
    return mark;
  }

  /**
   * What `close()` did with each tag's unused ids (empty before it, or with `giveBackOnClose:
   * false`): given back, taken since (another range was taken after this node's: nothing changed),
   * skipped or failed, with the ids `[from, end)` concerned.
   */
  giveBackReport(): readonly GiveBackOutcome[] {
    return this.givenBack;
  }

  // ---- internals -------------------------------------------------------------------------------

  private async nextIdWaiting(tag: string): Promise<bigint> {
    for (;;) {
      const b = this.lookup(tag);
      const id = this.loader.take(b);
      if (id !== undefined) return id;
      await this.loader.waitForRange(b, performance.now() + this.waitMs);
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
   * At each refresh, a refused tag whose row now has a sane step and a max id at or above the end
   * of every range this process used is served again (from a new range).
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
        // Refused below the max id it read: lifted only at or above that max id.
        (reasonOf(b.refused) !== BELOW_SEEN ||
          row.maxId >= (this.highWater?.seenOf(b.tag) ?? 0n)) &&
        row.maxId <= MAX_ID - BigInt(row.step);
      if (!sane) {
        // Said again at every refresh, at error level, until the row is fixed (or a mark
        // forgotten); `refused` marks only the moment the tag stopped being served.
        this.report(this.loader.refusedError(b), {
          tag: b.tag,
          operation: "refresh",
          level: "error",
        });
        continue;
      }
      b.refused = undefined;
      b.consecutiveFailures = 0;
      if (this.loadOnStart === true || b.initialized) this.loader.startLoad(b);
    }
  }

  private async doRefresh(): Promise<void> {
    const seq = this.changeSeq;
    let tags: string[];
    // With high-water marks the refresh reads every row: the max ids show how far other nodes took
    // ranges, and the node keeps the highest it read (see TagLoader's skip below them).
    let rows: TagRecord[] | undefined;
    try {
      if (this.highWater === undefined) tags = await this.store.listTags();
      else {
        rows = await this.store.describeTags();
        tags = rows.map((r) => r.tag);
      }
    } catch (error) {
      this.refreshFailures++;
      this.lastRefreshError = error;
      this.report(error, { operation: "refresh" });
      throw error;
    }
    if (this.state === "closed") return;
    if (rows !== undefined) {
      try {
        await this.highWater!.observe(rows);
      } catch (error) {
        // Not fatal: the ranges' own marks are still written before they are served.
        this.report(error, { operation: "refresh" });
      }
    }
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
    await this.checkMarks(added);
    // At start, start() loads the tags selected (and waits for them); later, the refresh does.
    if (this.state === "running" && added.length > 0) {
      for (const b of await this.selectEarly(added)) this.loader.startLoad(b);
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
    const taken = this.retired.get(tag) ?? 0n;
    const mark = this.highWater?.get(tag) ?? 0n;
    const b = new TagBuffer(tag, mark > taken ? mark : taken);
    b.taken = taken;
    b.strided = this.retiredStrided.get(tag);
    this.addedAt.set(tag, this.changeSeq);
    this.retired.delete(tag);
    this.retiredStrided.delete(tag);
    this.buffers.set(tag, b);
    return b;
  }

  private removeBuffer(b: TagBuffer, reason?: LeafError): void {
    b.remove();
    if (b.retryTimer) clearTimeout(b.retryTimer);
    b.retryTimer = undefined;
    this.buffers.delete(b.tag);
    if (b.taken > 0n) this.retired.set(b.tag, b.taken);
    if (b.strided !== undefined) this.retiredStrided.set(b.tag, b.strided);
    const error = reason ?? unknownTag(b.tag, `the ${this.store.kind} store (removed at refresh)`);
    for (const w of b.waiters) {
      clearTimeout(w.timer);
      w.reject(error);
    }
    b.waiters = [];
  }

  /**
   * Before a tag found by a refresh takes its first range: when the node's stored mark is above the
   * tag's stored max id, the tag is refused without taking a range (the store's max id is left as
   * it is, so a fixed row is served again at a refresh). One read of the rows for all of them; a
   * range that still comes back below the mark is refused by the loader.
   */
  private async checkMarks(added: TagBuffer[]): Promise<void> {
    const marked = added.filter((b) => b.floor > b.taken);
    if (marked.length === 0) return;
    let records: TagRecord[];
    try {
      records = await this.store.describeTags();
    } catch (error) {
      this.report(error, { operation: "refresh" });
      return;
    }
    const byTag = new Map(records.map((r) => [r.tag, r]));
    for (const b of marked) {
      const row = byTag.get(b.tag);
      if (row !== undefined && row.maxId < b.floor && !b.removed)
        this.refuseBelowMark(b, row.maxId);
    }
  }

  /** Refuses `b` (no range taken) because `maxId` is below the node's stored mark. */
  private refuseBelowMark(b: TagBuffer, maxId: bigint): void {
    const where = `the ${this.store.kind} store`;
    this.loader.refuse(
      b,
      belowHighWater(this.highWater!, b.tag, maxId, b.floor, where, false),
      false,
    );
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
}
