// The generator's monitoring views: a tag's double buffer as Java Leaf's `/cache` page shows it
// (and more: load times, failures, retries, refusal), and the generator-wide status.
import { performance } from "node:perf_hooks";
import { residueOf } from "./residue-range";
import type { RangeSnapshot, TagBuffer } from "./segment-buffer";
import { message, reasonOf } from "./tag-loader";

/** Monitoring view of one tag, the data of Java Leaf's `/cache` page and more. */
export interface TagSnapshot {
  tag: string;
  /** A range has been loaded (Java Leaf's `init`). */
  initialized: boolean;
  /** Which slot of `segments` is current (Java Leaf's `pos`); it flips on every range switch. */
  currentPos: 0 | 1;
  /**
   * Java Leaf's two segments: `segments[currentPos]` is current, the other the next (null when not
   * loaded).
   */
  segments: [RangeSnapshot | null, RangeSnapshot | null];
  /** The next range is loaded and ready (Java Leaf's `nextReady`). */
  nextReady: boolean;
  /** A load is in flight. */
  loading: boolean;
  /** Ids left in the current range and every range ready ahead together. */
  idsLeft: bigint;
  /** Ranges ready ahead of the current one (Java Leaf has at most 1). */
  rangesAhead: number;
  /**
   * End (exclusive) of the last range this node holds, the current one or the last ready ahead (the
   * store's max_id as far as this node knows); null before the first range.
   */
  heldEnd: bigint | null;
  /**
   * Ranges the prefetch keeps ready ahead now: 1 (Leaf's double buffer) up to `prefetch.maxDepth`.
   */
  depth: number;
  /**
   * Requests that found no id ready (they waited for a load, or failed with -3 on the sync path).
   */
  starvations: number;
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

/** The {@link TagSnapshot} of `b`, read now. */
export function snapshotOf(b: TagBuffer): TagSnapshot {
  const current = b.currentSnapshot();
  const next: RangeSnapshot | null = b.next
    ? { value: b.next.start, max: b.next.end, step: b.next.step, ...residueOf(b.next) }
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
    idsLeft: b.currentLeft() + b.aheadLeft(),
    rangesAhead: b.ahead.length,
    heldEnd: b.ahead.length > 0 ? b.ahead[b.ahead.length - 1]!.end : (current?.max ?? null),
    depth: b.depth,
    starvations: b.starvations,
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
