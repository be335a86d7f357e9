// The one error type of every @leaf package: a stable string code to branch on, the Java Leaf
// numeric code where one exists, and the component that raised it in the message.

/** Stable error codes. Values never change once published; new ones may be added. */
export const ErrorCodes = {
  /** A function argument or request parameter is malformed or out of range. */
  INVALID_ARGUMENT: "INVALID_ARGUMENT",
  /** A configuration value is missing or invalid; `details.key` names it. */
  INVALID_CONFIG: "INVALID_CONFIG",
  /** A bit layout does not fit 63 bits, or one of its fields is invalid. */
  INVALID_LAYOUT: "INVALID_LAYOUT",
  /** An id to decode is not a non-negative 63-bit integer, or does not fit its layout. */
  INVALID_ID: "INVALID_ID",
  /** The clock moved back by more than the tolerance (Leaf snowflake code -3). */
  CLOCK_MOVED_BACKWARDS: "CLOCK_MOVED_BACKWARDS",
  /** The clock is still behind the last issued timestamp after waiting (Leaf snowflake code -1). */
  CLOCK_BEHIND: "CLOCK_BEHIND",
  /**
   * The clock is behind the highest timestamp the registry holds for this worker: start refused.
   */
  CLOCK_BEHIND_LEASE: "CLOCK_BEHIND_LEASE",
  /** This node's clock is too far from its peers' reported clocks: start refused. */
  CLOCK_SKEW: "CLOCK_SKEW",
  /**
   * The layout cannot represent the current time any more: no id is issued (never a wrapped id).
   */
  LAYOUT_EXHAUSTED: "LAYOUT_EXHAUSTED",
  /** The worker-id lease was lost; the generator is fenced (Leaf fork code -4). */
  LEASE_LOST: "LEASE_LOST",
  /** No worker id is left in the layout's range, or the node's configured id is outside it. */
  WORKER_IDS_EXHAUSTED: "WORKER_IDS_EXHAUSTED",
  /** The worker id is held by another live process. */
  WORKER_ID_IN_USE: "WORKER_ID_IN_USE",
  /** A registry, store or server could not be reached. */
  UNAVAILABLE: "UNAVAILABLE",
  /** Segment cache not initialised yet (Leaf segment code -1). */
  NOT_INITIALIZED: "NOT_INITIALIZED",
  /** Unknown segment tag (Leaf segment code -2). */
  UNKNOWN_TAG: "UNKNOWN_TAG",
  /** Both segments of a tag are used up and the next could not be loaded (Leaf segment code -3). */
  SEGMENTS_EXHAUSTED: "SEGMENTS_EXHAUSTED",
  /**
   * A segment tag's ids are used up: no range of its step fits below 2^63 - 1 any more. Permanent
   * (retrying changes nothing); Java Leaf's paths show it as segment code -3.
   */
  TAG_EXHAUSTED: "TAG_EXHAUSTED",
  /** The sequence space of a time slot is used up. */
  SEQUENCE_EXHAUSTED: "SEQUENCE_EXHAUSTED",
  /** A resource (tag, node) already exists; nothing was changed. */
  ALREADY_EXISTS: "ALREADY_EXISTS",
  /** A resource (data folder, cache file) is locked by another process. */
  LOCKED: "LOCKED",
  /** Stored data is corrupt or not in the expected format. */
  CORRUPT_DATA: "CORRUPT_DATA",
  /** The component was closed. */
  CLOSED: "CLOSED",
  /**
   * An id asked for as a JS `number` is above Number.MAX_SAFE_INTEGER (2^53 - 1): it is not handed
   * out (never a rounded id). Ask for a bigint or a string form instead.
   */
  UNSAFE_INTEGER: "UNSAFE_INTEGER",
} as const;

/** One of {@link ErrorCodes}. */
export type ErrorCode = (typeof ErrorCodes)[keyof typeof ErrorCodes];

/** Java Leaf's numeric codes, kept so HTTP answers and logs match what Leaf users know. */
export const LeafCodes = {
  SEGMENT_NOT_INITIALIZED: -1,
  SEGMENT_UNKNOWN_TAG: -2,
  SEGMENTS_EXHAUSTED: -3,
  SNOWFLAKE_CLOCK_BEHIND: -1,
  SNOWFLAKE_CLOCK_MOVED_BACKWARDS: -3,
  LEASE_LOST: -4,
} as const;

/** Options of {@link LeafError}. */
export interface LeafErrorOptions {
  /** The package or part that raised it: "core", "segment", "registry-zk", "server", ... */
  component: string;
  code: ErrorCode;
  /** What happened, the value seen, and what to do. Without the "[leaf] [component]" prefix. */
  message: string;
  /** Java Leaf's numeric code, where one exists. */
  leafCode?: number;
  /** Structured facts for logs and HTTP answers (the config key, the times compared, ...). */
  details?: Record<string, unknown>;
  cause?: unknown;
}

/**
 * The base error of every @leaf package. `code` is stable and meant for programs; the message
 * reads `[leaf] [component] what happened` and is meant for people.
 */
/**
 * Marks every LeafError, from whichever copy of this package made it: an application may load both
 * the ESM and the CommonJS build (the dual-package hazard), or two versions, and `instanceof`
 * against one copy's class would miss the other's errors. The registry symbol is shared by all.
 */
const LEAF_ERROR = Symbol.for("@leaf/core/LeafError");

export class LeafError extends Error {
  /** `instanceof LeafError` is true for a LeafError made by any copy of @leaf/core. */
  static override [Symbol.hasInstance](value: unknown): boolean {
    // A subclass keeps the ordinary prototype check: `this` is the class instanceof was asked
    // about.
    // biome-ignore lint/complexity/noThisInStatic: the receiver decides, LeafError or a subclass
    if (this !== LeafError) return Function.prototype[Symbol.hasInstance].call(this, value);
    return typeof value === "object" && value !== null && LEAF_ERROR in value;
  }

  /** Stable string code, one of {@link ErrorCodes}. */
  readonly code: ErrorCode;
  /** Java Leaf's numeric code (-1 ... -4), when the condition has one. */
  readonly leafCode: number | undefined;
  /** The component that raised the error. */
  readonly component: string;
  /** Structured facts about the failure. */
  readonly details: Record<string, unknown>;

  constructor(options: LeafErrorOptions) {
    super(`[leaf] [${options.component}] ${options.message}`, { cause: options.cause });
    this.name = "LeafError";
    this.code = options.code;
    this.leafCode = options.leafCode;
    this.component = options.component;
    this.details = options.details ?? {};
    Object.defineProperty(this, LEAF_ERROR, { value: true });
  }
}

/**
 * True when `error` is a {@link LeafError}, optionally with the given code; also for errors made by
 * another copy of @leaf/core (its ESM and CommonJS builds loaded side by side).
 */
export function isLeafError(error: unknown, code?: ErrorCode): error is LeafError {
  return error instanceof LeafError && (code === undefined || error.code === code);
}

/**
 * `error`'s message without its "[leaf] [component] " start (a LeafError's), to quote inside
 * another message; any other error's message as it is.
 */
export function bareMessage(error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  return message.replace(/^\[leaf\] \[[^\]]+\] /, "");
}

/** A configuration error naming the key, the value seen and what was expected. */
export function configError(
  component: string,
  key: string,
  value: unknown,
  expected: string,
): LeafError {
  return new LeafError({
    component,
    code: ErrorCodes.INVALID_CONFIG,
    message: `invalid ${key}: ${describeValue(value)}; expected ${expected}`,
    details: { key, value: safeValue(value), expected },
  });
}

/** An argument error naming the parameter, the value seen and what was expected. */
export function argumentError(
  component: string,
  name: string,
  value: unknown,
  expected: string,
): LeafError {
  return new LeafError({
    component,
    code: ErrorCodes.INVALID_ARGUMENT,
    message: `invalid ${name}: ${describeValue(value)}; expected ${expected}`,
    details: { name, value: safeValue(value), expected },
  });
}

/** A short, printable description of any value, for error messages (long strings are cut). */
export function describeValue(value: unknown): string {
  if (typeof value === "string") {
    const shown = value.length > 80 ? `${value.slice(0, 80)}...` : value;
    return JSON.stringify(shown);
  }
  if (typeof value === "bigint") return `${value}n`;
  if (value === undefined) return "undefined (missing)";
  if (typeof value === "number" || typeof value === "boolean" || value === null) {
    return String(value);
  }
  try {
    const json = JSON.stringify(value, (_k, v) => (typeof v === "bigint" ? `${v}` : v));
    return json.length > 80 ? `${json.slice(0, 80)}...` : json;
  } catch {
    return Object.prototype.toString.call(value);
  }
}

function safeValue(value: unknown): unknown {
  return typeof value === "bigint" ? value.toString() : value;
}
