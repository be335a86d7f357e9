// A SegmentStore decorator that times every range taken and counts every failed operation, so that
// the metrics see each load exactly (the generator's snapshots only show the last one). The
// contract's optional calls (start, giveBack) pass through exactly when the store has them.
import { performance } from "node:perf_hooks";
import { isLeafError } from "@leaf/core";
import type { NewTag, RangeResidue, SegmentRange, SegmentStore, TagRecord } from "@leaf/segment";

/**
 * The counters this store feeds (ServerMetrics has them; named here so the two files do not import
 * each other).
 */
export interface StoreMetrics {
  segmentLoads: { inc(labels: { tag: string; result: "ok" | "error" }): void };
  segmentLoadSeconds: { observe(labels: { tag: string }, seconds: number): void };
  storeErrors: { inc(labels: { store: string; operation: string }): void };
}

/** The store's connection as its last operations saw it. */
export interface StoreHealth {
  /** "up" after a success, "down" after a failure of the store itself, "unknown" before either. */
  state: "up" | "down" | "unknown";
  /** ms since 1970 of the last success and the last failure; null when none. */
  lastOkAt: number | null;
  lastFailureAt: number | null;
  lastFailure: string | null;
}

/** Wraps `store`; every call goes through unchanged, with its time and outcome recorded. */
export class InstrumentedStore implements SegmentStore {
  readonly kind: string;
  private lastOkAt: number | null = null;
  private lastFailureAt: number | null = null;
  private lastFailure: string | null = null;

  /** The store's own start-up work, when it has some (the embedded store opens its folder). */
  readonly start?: () => Promise<void>;
  /** Give-back on close, when the store offers it: without it a graceful stop would skip ids. */
  readonly giveBack?: (
    tag: string,
    from: bigint,
    end: bigint,
    residue?: RangeResidue,
  ) => Promise<boolean>;
  /** Its ranges may be strided (a residue set): the generator refuses high-water marks then. */
  readonly stridedRanges?: boolean;

  constructor(
    private readonly store: SegmentStore,
    private readonly metrics: StoreMetrics,
  ) {
    this.kind = store.kind;
    this.stridedRanges = store.stridedRanges;
    // The optional parts of the contract are passed through only where the store has them.
    const { start, giveBack } = store;
    if (start) this.start = () => this.count("start", start.call(store));
    if (giveBack) {
      this.giveBack = (tag, from, end, residue) =>
        this.count("giveBack", giveBack.call(store, tag, from, end, residue));
    }
  }

  async takeRange(tag: string, step?: number, floor?: bigint): Promise<SegmentRange> {
    const started = performance.now();
    try {
      const range = await this.store.takeRange(tag, step, floor);
      this.lastOkAt = Date.now();
      this.metrics.segmentLoads.inc({ tag, result: "ok" });
      this.metrics.segmentLoadSeconds.observe({ tag }, (performance.now() - started) / 1000);
      return range;
    } catch (error) {
      this.metrics.segmentLoads.inc({ tag, result: "error" });
      if (isStoreFailure(error)) {
        this.failed(error);
        this.metrics.storeErrors.inc({ store: this.kind, operation: "takeRange" });
      }
      throw error;
    }
  }

  listTags(): Promise<string[]> {
    return this.count("listTags", this.store.listTags());
  }

  describeTags(): Promise<TagRecord[]> {
    return this.count("describeTags", this.store.describeTags());
  }

  createTag(tag: NewTag): Promise<TagRecord> {
    return this.count("createTag", this.store.createTag(tag));
  }

  updateStep(tag: string, step: number): Promise<TagRecord> {
    return this.count("updateStep", this.store.updateStep(tag, step));
  }

  deleteTag(tag: string): Promise<TagRecord | undefined> {
    return this.count("deleteTag", this.store.deleteTag(tag));
  }

  close(): Promise<void> {
    return this.store.close();
  }

  /** The connection as the last operations saw it (the monitor's and metrics' "database state"). */
  health(): StoreHealth {
    const state =
      this.lastFailureAt === null && this.lastOkAt === null
        ? "unknown"
        : (this.lastFailureAt ?? 0) > (this.lastOkAt ?? 0)
          ? "down"
          : "up";
    return {
      state,
      lastOkAt: this.lastOkAt,
      lastFailureAt: this.lastFailureAt,
      lastFailure: this.lastFailure,
    };
  }

  private async count<T>(operation: string, call: Promise<T>): Promise<T> {
    try {
      const result = await call;
      this.lastOkAt = Date.now();
      return result;
    } catch (error) {
      if (isStoreFailure(error)) {
        this.failed(error);
        this.metrics.storeErrors.inc({ store: this.kind, operation });
      }
      throw error;
    }
  }

  private failed(error: unknown): void {
    this.lastFailureAt = Date.now();
    this.lastFailure = error instanceof Error ? error.message : String(error);
  }
}

/** A failure of the store itself, not a refusal of bad input (a malformed tag, an unknown one). */
function isStoreFailure(error: unknown): boolean {
  return !(
    isLeafError(error) &&
    (error.code === "INVALID_ARGUMENT" || error.code === "UNKNOWN_TAG" || error.code === "CLOSED")
  );
}
