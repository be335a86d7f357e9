// Checks of tags, steps, start ids and descriptions, shared by every store and the generator, so
// that bad input gets the same clear INVALID_ARGUMENT error wherever it enters.
import { argumentError, ErrorCodes, LeafCodes, LeafError } from "@leaf/core";
import type { NewTag, RangeRefusal, SegmentRange } from "./segment-store";

/** Component name in every error of this package. */
export const COMPONENT = "segment";

/** Longest tag, in characters (Java Leaf's `biz_tag varchar(128)`). */
export const MAX_TAG_LENGTH = 128;
/** Longest description, in characters (`description varchar(256)`). */
export const MAX_DESCRIPTION_LENGTH = 256;
/** Largest step: the SQL `int` column's maximum. */
export const MAX_STEP = 2_147_483_647;
/** Largest id a range may reach: 2^63 - 1 (SQL `bigint`). */
export const MAX_ID = (1n << 63n) - 1n;

// C0 and C1 control characters, DEL included.
// biome-ignore lint/suspicious/noControlCharactersInRegex: matching control characters is the point
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;

/**
 * Throws INVALID_ARGUMENT unless `tag` is a string of 1 to 128 characters (code points) without
 * control characters or lone surrogates. Says which rule failed.
 */
export function checkTag(tag: unknown, name = "tag"): asserts tag is string {
  if (typeof tag !== "string") {
    throw argumentError(COMPONENT, name, tag, "a string of 1 to 128 characters");
  }
  if (tag.length === 0) {
    throw argumentError(COMPONENT, name, tag, "a non-empty string of up to 128 characters");
  }
  if (tag.length > MAX_TAG_LENGTH && countCodePoints(tag) > MAX_TAG_LENGTH) {
    throw argumentError(
      COMPONENT,
      name,
      tag,
      `at most ${MAX_TAG_LENGTH} characters (got ${countCodePoints(tag)})`,
    );
  }
  if (CONTROL.test(tag)) {
    throw argumentError(COMPONENT, name, tag, "no control characters (tabs, newlines, NUL, ...)");
  }
  if (!isWellFormed(tag)) {
    throw argumentError(COMPONENT, name, tag, "well-formed Unicode (no lone surrogates)");
  }
}

/** True when `tag` passes {@link checkTag}. */
export function isValidTag(tag: unknown): tag is string {
  try {
    checkTag(tag);
    return true;
  } catch {
    return false;
  }
}

/** Throws INVALID_ARGUMENT unless `step` is an integer from 1 to 2,147,483,647. */
export function checkStep(step: unknown, name = "step"): asserts step is number {
  if (typeof step !== "number" || !Number.isInteger(step) || step < 1 || step > MAX_STEP) {
    throw argumentError(COMPONENT, name, step, `an integer from 1 to ${MAX_STEP}`);
  }
}

/** Throws INVALID_ARGUMENT unless `floor` (takeRange's) is undefined or a bigint from 0 to 2^63 - 1. */
export function checkFloor(floor: unknown): asserts floor is bigint | undefined {
  if (floor === undefined) return;
  if (typeof floor !== "bigint" || floor < 0n || floor > MAX_ID) {
    throw argumentError(COMPONENT, "floor", floor, `a bigint from 0n to ${MAX_ID}n`);
  }
}

/**
 * The floor a store checks a range of `tag` against: the end of every range it handed out
 * (`floors`), or `given`, the caller's (its high-water mark), when that is higher; `mark` says
 * which. Throws as {@link checkFloor}.
 */
export function floorOf(
  floors: RangeFloors,
  tag: string,
  given: unknown,
): { floor: bigint; mark: boolean } {
  checkFloor(given);
  const own = floors.get(tag);
  if (given === undefined) return { floor: own, mark: false };
  return given > own ? { floor: given, mark: true } : { floor: own, mark: false };
}

/** Throws INVALID_ARGUMENT unless `id` is a bigint from 0 to 2^63 - 1. */
export function checkStartId(id: unknown, name = "startId"): asserts id is bigint {
  if (typeof id !== "bigint" || id < 0n || id > MAX_ID) {
    throw argumentError(COMPONENT, name, id, `a bigint from 0n to ${MAX_ID}n`);
  }
}

/** Throws INVALID_ARGUMENT unless `description` is null, undefined or up to 256 characters. */
export function checkDescription(description: unknown): void {
  if (description === undefined || description === null) return;
  if (typeof description !== "string" || countCodePoints(description) > MAX_DESCRIPTION_LENGTH) {
    throw argumentError(
      COMPONENT,
      "description",
      description,
      `null or a string of up to ${MAX_DESCRIPTION_LENGTH} characters`,
    );
  }
  if (!isWellFormed(description)) {
    throw argumentError(COMPONENT, "description", description, "well-formed Unicode");
  }
}

/** Checks a {@link NewTag} and returns it with defaults applied. */
export function normalizeNewTag(input: NewTag): Required<NewTag> {
  if (input === null || typeof input !== "object") {
    throw argumentError(COMPONENT, "tag", input, "an object {tag, step, startId?, description?}");
  }
  checkTag(input.tag);
  if (input.tag === "." || input.tag === "..") {
    // A URL path drops these segments (`/api/segment/get/..` is `/api/`), so no client could ask
    // for the new tag's ids. A row by such a name made elsewhere is still read and served.
    throw argumentError(
      COMPONENT,
      "tag",
      input.tag,
      'a tag other than "." and ".." (a URL path drops them, so its ids could not be asked for)',
    );
  }
  checkStep(input.step);
  const startId = input.startId ?? 1n;
  checkStartId(startId);
  checkDescription(input.description);
  return {
    tag: input.tag,
    step: input.step,
    startId,
    description: input.description ?? null,
  };
}

/** The UNKNOWN_TAG error (Leaf code -2). */
export function unknownTag(tag: string, where: string): LeafError {
  return new LeafError({
    component: COMPONENT,
    code: ErrorCodes.UNKNOWN_TAG,
    leafCode: LeafCodes.SEGMENT_UNKNOWN_TAG,
    message: `unknown tag ${JSON.stringify(tag)} in ${where}; create it first (createTag, or a leaf_alloc row)`,
    details: { tag },
  });
}

/** The error for creating a tag that exists. */
export function tagExists(tag: string, where: string): LeafError {
  return new LeafError({
    component: COMPONENT,
    code: ErrorCodes.ALREADY_EXISTS,
    message: `tag ${JSON.stringify(tag)} already exists in ${where}; change its step with updateStep, or pick another name`,
    details: { tag, reason: "exists" },
  });
}

/**
 * The error for creating a tag again below the max id it had when it was deleted: its old ranges
 * handed out ids up to `deletedMaxId - 1`, so a start below would repeat them.
 */
export function belowDeletedTag(
  tag: string,
  startId: bigint,
  deletedMaxId: bigint,
  where: string,
): LeafError {
  return new LeafError({
    component: COMPONENT,
    code: ErrorCodes.ALREADY_EXISTS,
    message:
      `tag ${JSON.stringify(tag)} was deleted from ${where} with max id ${deletedMaxId}: ids below it were ` +
      `handed out, so it cannot be created again at start id ${startId}; create it with a start id of at ` +
      `least ${deletedMaxId}, or pick another name`,
    details: {
      tag,
      reason: "deleted",
      startId: startId.toString(),
      minStartId: deletedMaxId.toString(),
    },
  });
}

/**
 * The error for a range that would pass 2^63 - 1: TAG_EXHAUSTED, permanent (Leaf code -3 on Java
 * Leaf's paths). Nothing was changed.
 */
export function rangeOverflow(tag: string, maxId: bigint, step: number): LeafError {
  const left = maxId >= MAX_ID ? 0n : MAX_ID - maxId;
  return new LeafError({
    component: COMPONENT,
    code: ErrorCodes.TAG_EXHAUSTED,
    leafCode: LeafCodes.SEGMENTS_EXHAUSTED,
    message:
      `tag ${JSON.stringify(tag)} is used up: a range of ${step} from max id ${maxId} would pass ` +
      `2^63 - 1 (${left} ids left). Retrying changes nothing: move its callers to a new tag ` +
      "(or lower its step to hand out the last ids)",
    details: { tag, maxId: maxId.toString(), step, idsLeft: left.toString(), reason: "exhausted" },
  });
}

export type { RangeRefusal } from "./segment-store";

/** The error for a stored step that no range may be taken with (a damaged row). */
export function badStoredStep(tag: string, step: unknown, where: string): LeafError {
  return refusal(
    "bad-step",
    tag,
    `refused to take a range of tag ${JSON.stringify(tag)}: its stored step is ${String(step)} in ${where}, ` +
      `expected an integer from 1 to ${MAX_STEP}; nothing was changed. Fix the row (set step to a positive integer)`,
    { step: String(step) },
  );
}

/** The error for a negative stored max id (a damaged row). */
export function badStoredMaxId(tag: string, maxId: bigint, where: string): LeafError {
  return refusal(
    "bad-max-id",
    tag,
    `refused to take a range of tag ${JSON.stringify(tag)}: its stored max id is ${maxId} in ${where}, ` +
      `expected 0 .. 2^63 - 1; nothing was changed. Fix the row (set max_id above every id handed out)`,
    { maxId: maxId.toString() },
  );
}

/**
 * The error for a max id below `floor`, the end of a range this process already took: ids would
 * repeat. `stale` names the host answering and the host that range came from when they differ (a
 * failover to a server that lacks writes: a stale primary). `taken` says the store already moved
 * its max id for this range (a store without its own check), which is then dropped: a gap.
 */
export function maxIdMovedBack(
  tag: string,
  maxId: bigint,
  floor: bigint,
  where: string,
  more: { stale?: { host: string; from: string }; taken?: boolean; mark?: boolean } = {},
): LeafError {
  const { stale, taken = false, mark = false } = more;
  const why =
    stale === undefined
      ? "its max id was moved back (or the tag re-created lower)"
      : `${stale.host} is a stale primary: it lacks writes made on ${stale.from} (a failover without semi-synchronous replication), or the max id was moved back`;
  return refusal(
    stale === undefined ? "max-id-moved-back" : "stale-primary",
    tag,
    `refused ${taken ? "the range" : "to take a range"} of tag ${JSON.stringify(tag)}: its max id ${taken ? "was" : "is"} ${maxId} in ${where}, below ${floor}, ` +
      `${mark ? "the end of the highest range this node took (its high-water mark)" : "the end of a range this process already took"}, so ids would repeat: ${why}. ${taken ? "No id of the range was handed out" : "Nothing was changed"}; ` +
      `the tag stays refused until its max id is set to at least ${floor} (and above the highest id every server handed out)`,
    { maxId: maxId.toString(), floor: floor.toString(), ...(stale ?? {}) },
  );
}

/**
 * What is wrong with `range` as an answer to a request for a range of `tag`, or undefined: it must
 * be `[start, start + step)` with `0 <= start < end <= 2^63 - 1` and steps from 1 to 2,147,483,647,
 * and a stride (if any) from 1 to 2,147,483,647 with a remainder from 0 to below it.
 */
export function rangeProblem(range: SegmentRange, tag: string): string | undefined {
  if (range === null || typeof range !== "object") return `not a range object: ${String(range)}`;
  const { start, end, step, tableStep } = range;
  if (range.tag !== tag) return `it is of tag ${JSON.stringify(range.tag)}`;
  if (typeof start !== "bigint" || typeof end !== "bigint") return "start and end are not bigints";
  if (end <= start) return `its end ${end} is not above its start ${start}`;
  if (start < 0n || end > MAX_ID) return "it is outside 0 .. 2^63 - 1";
  if (!Number.isInteger(step) || step < 1 || step > MAX_STEP)
    return `its step ${step} is not 1 .. ${MAX_STEP}`;
  if (end - start !== BigInt(step)) return `it holds ${end - start} ids, not its step ${step}`;
  if (!Number.isInteger(tableStep) || tableStep < 1 || tableStep > MAX_STEP) {
    return `the stored step ${tableStep} is not 1 .. ${MAX_STEP}`;
  }
  const { stride, remainder } = range;
  if (stride !== undefined && (!Number.isInteger(stride) || stride < 1 || stride > MAX_STEP)) {
    return `its stride ${stride} is not 1 .. ${MAX_STEP}`;
  }
  if (
    remainder !== undefined &&
    (!Number.isInteger(remainder) || remainder < 0 || remainder >= (stride ?? 1))
  ) {
    return `its remainder ${remainder} is not 0 .. ${(stride ?? 1) - 1}`;
  }
  return undefined;
}

/** The error for a range a store answered that {@link rangeProblem} finds wrong. */
export function badRange(
  range: SegmentRange,
  tag: string,
  problem: string,
  where: string,
): LeafError {
  const shown =
    range !== null && typeof range === "object"
      ? `[${String(range.start)}, ${String(range.end)})`
      : String(range);
  return refusal(
    "bad-range",
    tag,
    `refused range ${shown} of tag ${JSON.stringify(tag)} from ${where}: ${problem}; no id of it was handed out. ` +
      "The store or its row is damaged: fix it (a positive step, a max id above every id handed out)",
    { problem },
  );
}

function refusal(
  reason: RangeRefusal,
  tag: string,
  message: string,
  details: Record<string, unknown>,
): LeafError {
  return new LeafError({
    component: COMPONENT,
    code: ErrorCodes.CORRUPT_DATA,
    message,
    details: { tag, reason, ...details },
  });
}

/**
 * The highest range end a store instance (or a generator) has handed out per tag, and where it came
 * from: a range starting below it would repeat ids. It also keeps where the run of ranges handed
 * out back to back up to that end starts, so that a give-back can be checked to hold only own ids.
 */
export class RangeFloors {
  private readonly floors = new Map<string, { end: bigint; source: string; runStart: bigint }>();

  /** The floor of `tag`: 0 before any range. */
  get(tag: string): bigint {
    return this.floors.get(tag)?.end ?? 0n;
  }

  /** Where the range that set the floor of `tag` came from (a host), if any. */
  source(tag: string): string | undefined {
    return this.floors.get(tag)?.source;
  }

  /**
   * Raises the floor of `tag` to `end` (never lowers it). `start`, the range's first id, extends
   * the run when it is the floor so far and starts a new one otherwise.
   */
  raise(tag: string, end: bigint, source: string, start = end): void {
    const now = this.floors.get(tag);
    if (now !== undefined && end <= now.end) return;
    const runStart = now !== undefined && start === now.end ? now.runStart : start;
    this.floors.set(tag, { end, source, runStart });
  }

  /**
   * Checks a give-back of `[from, end)` of `tag` against the ranges handed out: "mine" when `end`
   * is the floor and `from` within the run up to it, "moved-on" when a later range was handed out
   * (the stored max id is past `end`). Throws INVALID_ARGUMENT for ids this instance never handed
   * out.
   */
  checkGiveBack(tag: string, from: unknown, end: unknown): "mine" | "moved-on" {
    checkTag(tag);
    if (typeof end !== "bigint" || end < 0n || end > MAX_ID) {
      throw argumentError(COMPONENT, "end", end, `a bigint from 0 to ${MAX_ID}`);
    }
    if (typeof from !== "bigint" || from < 0n || from >= end) {
      throw argumentError(COMPONENT, "from", from, `a bigint from 0 to below end (${end})`);
    }
    const now = this.floors.get(tag);
    if (now === undefined || end > now.end) {
      throw argumentError(
        COMPONENT,
        "end",
        end,
        `the end of a range this store instance handed out for tag ${JSON.stringify(tag)} (its last ends at ${now?.end ?? "none"})`,
      );
    }
    if (end < now.end) return "moved-on";
    if (from < now.runStart) {
      throw argumentError(
        COMPONENT,
        "from",
        from,
        `at least ${now.runStart}, the start of the ranges this store instance handed out back to back up to ${end}`,
      );
    }
    return "mine";
  }

  /** After a give-back of `[from, end)`: the floor of `tag` is `from` again. Returns an undo. */
  lower(tag: string, from: bigint): () => void {
    const now = this.floors.get(tag);
    if (now === undefined) return () => {};
    this.floors.set(tag, { ...now, end: from });
    return () => this.floors.set(tag, now);
  }
}

/** The error for any call on a closed store or generator. */
export function closedError(what: string): LeafError {
  return new LeafError({
    component: COMPONENT,
    code: ErrorCodes.CLOSED,
    message: `${what} is closed; create a new one`,
  });
}

function countCodePoints(value: string): number {
  let count = 0;
  for (let i = 0; i < value.length; i++) {
    const c = value.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff && i + 1 < value.length) {
      const d = value.charCodeAt(i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) i++;
    }
    count++;
  }
  return count;
}

function isWellFormed(value: string): boolean {
  for (let i = 0; i < value.length; i++) {
    const c = value.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff) {
      const d = value.charCodeAt(i + 1);
      if (!(d >= 0xdc00 && d <= 0xdfff)) return false;
      i++;
    } else if (c >= 0xdc00 && c <= 0xdfff) {
      return false;
    }
  }
  return true;
}
