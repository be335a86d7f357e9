// The generator's options: their types and the checks that turn them into the settings the
// generator keeps, so that a wrong value fails at construction with the key named.
import { type BackoffOptions, type Clock, configError, systemClock } from "@leaf/core";
import { type DynamicStep, type DynamicStepOptions, resolveDynamicStep } from "./dynamic-step";
import type { HighWaterOptions } from "./high-water";
import type { SegmentStore } from "./segment-store";
import { COMPONENT, isValidTag } from "./validation";

/** Options of {@link SegmentIdGenerator}. */
export interface SegmentGeneratorOptions {
  /** Where ranges come from: a MysqlSegmentStore, an EmbeddedSegmentStore, or any SegmentStore. */
  store: SegmentStore;
  /** How often the tag list is re-read from the store, in ms (default 60,000, as Leaf). */
  refreshIntervalMs?: number;
  /**
   * Fraction of the current range used when the next range starts loading in the background
   * (default 0.1, as Leaf: once 10% is used). 0 loads the next range as soon as one becomes
   * current.
   */
  preloadThreshold?: number;
  /** Leaf's dynamic step; `false` always takes the table's step (default true: Leaf's settings). */
  dynamicStep?: boolean | DynamicStepOptions;
  /**
   * How long `nextId`/`nextIds` wait for a range when both are used up before failing with
   * SEGMENTS_EXHAUSTED (Leaf code -3), in ms (default 1,000). The wait is on the load, never a
   * spin.
   */
  exhaustedWaitMs?: number;
  /** Largest `nextIds` batch (default 10,000). */
  maxBatch?: number;
  /**
   * Delays between retries of a failed load (default: 100 ms doubling up to 5,000 ms, jittered).
   */
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
   * On `close()`, give the ids this generator holds and never handed out back to the store (a
   * compare-and-set: only when no other range was taken after its last one), so that a graceful
   * restart loses none (default true; stores without `giveBack` ignore it). See `giveBackReport()`.
   */
  giveBackOnClose?: boolean;
  /**
   * Ranges kept ready ahead of the current one: `false` keeps Leaf's double buffer (one range
   * ahead); by default the depth starts at one, grows while ranges last less than a few loads
   * (a burst) or a request finds no id ready, and shrinks back when ranges outlast many loads, up
   * to `maxDepth` (default 8). A deeper prefetch takes its ranges in one round trip.
   */
  prefetch?: boolean | PrefetchOptions;
  /**
   * Told about every failed load, refresh or refused range (for logs). The generator retries failed
   * loads on its own; `refused: true` means the tag is no longer served (log it at error level):
   * its range was CORRUPT_DATA (max id moved back, stale primary, damaged row, bad range).
   */
  onError?: (error: unknown, context: GeneratorErrorContext) => void;
  /**
   * Keep, per tag, the end of the highest range this node took from the store in a file of
   * `dir` (fsynced before the range is served), read at `start()`: a tag whose stored max id is
   * below it after a restart (moved back by hand, a replica that missed writes promoted) is refused
   * with CORRUPT_DATA instead of handing out ids again. Default: off (a restart remembers nothing).
   */
  highWater?: HighWaterOptions;
}

/** {@link SegmentGeneratorOptions.prefetch} in its object form. */
export interface PrefetchOptions {
  /**
   * Most ranges kept ready ahead of the current one: 1 to 64 (default 8; 1 is Leaf's double
   * buffer).
   */
  maxDepth?: number;
}

/** {@link SegmentGeneratorOptions.loadOnStart} in its selective form. */
export interface EagerLoadOptions {
  /**
   * Tags always loaded before their first request (hot tags). Tags not in the store are ignored.
   */
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
   * (nothing retried) until a refresh finds the tag's row fixed (max id at or above the end of
   * every range this process used, a positive step).
   */
  refused?: boolean;
  /**
   * "error" when the error needs an operator: a refused tag (told with `refused: true` when it
   * stops being served, then again at every refresh while it stays refused), or a store refusing
   * every range because more than one backing server takes writes (`details.reason` "split-brain").
   * Log these at error level; the others are transient and retried.
   */
  level?: "error";
}

/** Every tag early (true), none (false), or the ones {@link EagerLoadOptions} selects. */
export type EagerPolicy = boolean | { tags: Set<string>; updatedWithinMs: number | undefined };

/** {@link SegmentGeneratorOptions} checked, with their defaults filled in. */
export interface GeneratorSettings {
  store: SegmentStore;
  refreshIntervalMs: number;
  threshold: number;
  dynamic: DynamicStep | undefined;
  waitMs: number;
  maxBatch: number;
  retry: BackoffOptions;
  clock: Clock;
  loadOnStart: EagerPolicy;
  closeStore: boolean;
  giveBackOnClose: boolean;
  maxDepth: number;
  onError: SegmentGeneratorOptions["onError"];
  highWater: HighWaterOptions | undefined;
}

/** Checks `options` (throwing INVALID_CONFIG naming the key) and fills in the defaults. */
export function resolveGeneratorOptions(options: SegmentGeneratorOptions): GeneratorSettings {
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
  const refreshIntervalMs = positiveInteger(
    "refreshIntervalMs",
    options.refreshIntervalMs ?? 60_000,
  );
  const threshold = options.preloadThreshold ?? 0.1;
  if (typeof threshold !== "number" || !(threshold >= 0 && threshold <= 1)) {
    throw configError(
      COMPONENT,
      "preloadThreshold",
      threshold,
      "a fraction from 0 to 1 (default 0.1)",
    );
  }
  const dynamic = resolveDynamicStep(options.dynamicStep);
  const waitMs = nonNegativeInteger("exhaustedWaitMs", options.exhaustedWaitMs ?? 1_000);
  const maxBatch = positiveInteger("maxBatch", options.maxBatch ?? 10_000);
  const retry = { initialMs: 100, maxMs: 5_000, ...options.retry };
  const clock = options.clock ?? systemClock;
  const loadOnStart = eagerLoad(options.loadOnStart);
  return {
    store,
    refreshIntervalMs,
    threshold,
    dynamic,
    waitMs,
    maxBatch,
    retry,
    clock,
    loadOnStart,
    closeStore: options.closeStore ?? true,
    giveBackOnClose: flag("giveBackOnClose", options.giveBackOnClose ?? true),
    maxDepth: prefetchDepth(options.prefetch),
    onError: options.onError,
    highWater: highWaterOptions(options.highWater),
  };
}

/** Checks `highWater`: a folder and the store's name, both non-empty strings. */
function highWaterOptions(
  option: SegmentGeneratorOptions["highWater"],
): HighWaterOptions | undefined {
  if (option === undefined) return undefined;
  const expected = "{ dir: a folder path, storeId: the store's name, lockStaleAfterMs?: ms }";
  if (typeof option !== "object" || option === null) {
    throw configError(COMPONENT, "highWater", option, expected);
  }
  if (typeof option.dir !== "string" || option.dir === "") {
    throw configError(COMPONENT, "highWater.dir", option.dir, "a folder path");
  }
  if (typeof option.storeId !== "string" || option.storeId === "") {
    throw configError(
      COMPONENT,
      "highWater.storeId",
      option.storeId,
      "a non-empty name of the store (for MySQL its database and table)",
    );
  }
  const stale = option.lockStaleAfterMs;
  if (stale !== undefined) positiveInteger("highWater.lockStaleAfterMs", stale);
  return option;
}

/** Checks `loadOnStart` and gives it the shape the generator keeps. */
function eagerLoad(option: SegmentGeneratorOptions["loadOnStart"]): EagerPolicy {
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

/** Checks `prefetch` and gives the largest depth (1: Leaf's double buffer). */
function prefetchDepth(option: SegmentGeneratorOptions["prefetch"]): number {
  if (option === undefined || option === true) return 8;
  if (option === false) return 1;
  if (option === null || typeof option !== "object") {
    throw configError(COMPONENT, "prefetch", option, "true, false or { maxDepth?: 1..64 }");
  }
  const depth = option.maxDepth ?? 8;
  if (!Number.isInteger(depth) || depth < 1 || depth > 64) {
    throw configError(COMPONENT, "prefetch.maxDepth", depth, "an integer from 1 to 64");
  }
  return depth;
}

function flag(key: string, value: unknown): boolean {
  if (typeof value !== "boolean") throw configError(COMPONENT, key, value, "true or false");
  return value;
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
