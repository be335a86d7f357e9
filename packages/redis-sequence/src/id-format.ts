// The two forms of a redis-sequence id and the way back from each: the 64-bit integer
// (time | shard | sequence), and the string prefix + yyyyMMddHHmmss + 6-digit sequence + 4-digit
// shard. Both give back the second, the shard and the sequence.
import {
  argumentError,
  configError,
  describeValue,
  ErrorCodes,
  type Layout,
  LeafError,
  layouts,
} from "@leaf/core";

const COMPONENT = "redis-sequence";
const DECIMAL_ID = /^[0-9]{1,19}$/;
const STRING_ID =
  /^([\s\S]*?)([0-9]{4})([0-9]{2})([0-9]{2})([0-9]{2})([0-9]{2})([0-9]{2})([0-9]{6})([0-9]{4})$/;
const FIXED_OFFSET = /^([+-])([0-9]{2}):?([0-9]{2})$/;
const MAX_PREFIX = 256;
const DAY_MS = 86_400_000;

/** Options of {@link SequenceIdFormat}. */
export interface SequenceIdFormatOptions {
  /**
   * Bit layout (default `layouts.redisSequence`: 32 bits of seconds since 2020-01-01Z, 12 bits of
   * shard, 19 bits of sequence). Its unit must be 1000 ms and its epoch a whole second; for the
   * string form its largest sequence must fit 6 digits and its largest shard 4 digits.
   */
  layout?: Layout;
  /**
   * Time zone of the yyyyMMddHHmmss part of the string form: "UTC" (default), a fixed offset such
   * as "+08:00", or an IANA name without daylight saving time such as "Asia/Shanghai". Zones with
   * daylight saving time are refused: their local time repeats an hour each year, so two seconds
   * would have the same string form.
   */
  timeZone?: string;
}

/** An id taken apart. */
export interface ParsedSequenceId {
  /** The id as a 64-bit integer. */
  id: bigint;
  /** The id's second, in seconds since the Unix epoch. */
  second: number;
  /** The same second in ms since the Unix epoch. */
  timestampMs: number;
  /** The same instant as a Date. */
  date: Date;
  /** The shard (0 .. layout.maxWorkerId). */
  shard: number;
  /** The sequence within the second (0 .. layout.maxSequence). */
  sequence: number;
  /** Which form was parsed: the integer (bigint or decimal string) or the string form. */
  form: "integer" | "string";
  /** The prefix of the string form ("" when none); undefined for the integer form. */
  prefix: string | undefined;
}

/** Checks that `layout` suits redis-sequence ids; throws INVALID_CONFIG naming what is wrong. */
export function checkSequenceLayout(layout: unknown): Layout {
  const candidate = layout as Layout | undefined;
  if (
    typeof candidate !== "object" ||
    candidate === null ||
    typeof candidate.compose !== "function" ||
    typeof candidate.decompose !== "function"
  ) {
    throw configError(COMPONENT, "layout", layout, "a Layout from @leaf/core's defineLayout()");
  }
  if (candidate.unitMillis !== 1000) {
    throw configError(
      COMPONENT,
      "layout.unitMillis",
      candidate.unitMillis,
      "1000: sequence ranges are allocated per second",
    );
  }
  if (candidate.epoch % 1000 !== 0) {
    throw configError(
      COMPONENT,
      "layout.epoch",
      candidate.epoch,
      "a whole second (a multiple of 1000 ms), so that the id's second is a Unix second",
    );
  }
  if (candidate.maxSequence > 999_999) {
    throw configError(
      COMPONENT,
      "layout.sequenceBits",
      candidate.sequenceBits,
      "at most 19, so that the sequence fits the 6 digits of the string form",
    );
  }
  if (candidate.maxWorkerId > 9_999) {
    throw configError(
      COMPONENT,
      "layout.workerBits",
      candidate.workerBits,
      "at most 13 shard bits, so that the shard fits the 4 digits of the string form",
    );
  }
  return candidate;
}

/**
 * The UTC offset in minutes of `timeZone`, which must be the same at every instant from the
 * layout's epoch to ten years from `now`.
 */
export function timeZoneOffsetMinutes(timeZone: unknown, layout: Layout, now = Date.now()): number {
  if (typeof timeZone !== "string" || timeZone.length === 0) {
    throw configError(COMPONENT, "timeZone", timeZone, 'a time zone such as "UTC" or "+08:00"');
  }
  if (timeZone === "UTC" || timeZone === "Z" || timeZone === "GMT") return 0;
  const fixed = FIXED_OFFSET.exec(timeZone);
  if (fixed) {
    const hours = Number(fixed[2]);
    const minutes = Number(fixed[3]);
    if (hours > 14 || minutes > 59) {
      throw configError(COMPONENT, "timeZone", timeZone, "an offset from -14:00 to +14:00");
    }
    return (fixed[1] === "-" ? -1 : 1) * (hours * 60 + minutes);
  }
  let formatter: Intl.DateTimeFormat;
  try {
    formatter = new Intl.DateTimeFormat("en-US", { timeZone, timeZoneName: "longOffset" });
  } catch {
    throw configError(
      COMPONENT,
      "timeZone",
      timeZone,
      'an IANA time zone name such as "Asia/Shanghai", "UTC" or a fixed offset such as "+08:00"',
    );
  }
  const offsets = new Set<number>();
  const end = Math.min(now + 3653 * DAY_MS, layout.lastInstantMs);
  for (let at = layout.epoch; at <= end; at += 7 * DAY_MS) {
    offsets.add(offsetAt(formatter, at));
  }
  offsets.add(offsetAt(formatter, now));
  if (offsets.size > 1) {
    const seen = [...offsets].map(showOffset).join(", ");
    throw configError(
      COMPONENT,
      "timeZone",
      timeZone,
      `a zone whose UTC offset never changes (this one has ${seen}): with daylight saving time ` +
        "an hour of local time repeats and two seconds would share a string id; use its " +
        `standard offset, for example "${showOffset(Math.min(...offsets))}"`,
    );
  }
  return [...offsets][0]!;
}

function offsetAt(formatter: Intl.DateTimeFormat, at: number): number {
  const name = formatter.formatToParts(at).find((p) => p.type === "timeZoneName")?.value ?? "GMT";
  const match = /^GMT(?:([+-])(\d{1,2})(?::(\d{2}))?)?$/.exec(name);
  if (!match?.[1]) return 0;
  return (match[1] === "-" ? -1 : 1) * (Number(match[2]) * 60 + Number(match[3] ?? 0));
}

function showOffset(minutes: number): string {
  const sign = minutes < 0 ? "-" : "+";
  const abs = Math.abs(minutes);
  return `${sign}${String(Math.floor(abs / 60)).padStart(2, "0")}:${String(abs % 60).padStart(2, "0")}`;
}

function pad(value: number, width: number): string {
  return String(value).padStart(width, "0");
}

/**
 * Formats and parses redis-sequence ids with one layout and one time zone. Needs no Redis: a
 * service holding an order id can find its shard and second with this alone.
 */
export class SequenceIdFormat {
  /** The bit layout. */
  readonly layout: Layout;
  /** The time zone of the string form, as configured. */
  readonly timeZone: string;
  /** Its UTC offset in minutes. */
  readonly offsetMinutes: number;
  private readonly epochSecond: number;

  constructor(options: SequenceIdFormatOptions = {}) {
    this.layout = checkSequenceLayout(options.layout ?? layouts.redisSequence);
    this.timeZone = options.timeZone ?? "UTC";
    this.offsetMinutes = timeZoneOffsetMinutes(this.timeZone, this.layout);
    this.epochSecond = this.layout.epoch / 1000;
  }

  /**
   * Builds the integer id of `sequence` in `second` (Unix seconds) for `shard`; all range-checked.
   */
  compose(second: number, shard: number, sequence: number): bigint {
    if (!Number.isSafeInteger(second)) {
      throw argumentError(COMPONENT, "second", second, "a whole number of Unix seconds");
    }
    return this.layout.compose({ ticks: second - this.epochSecond, workerId: shard, sequence });
  }

  /**
   * The string form of an id: `prefix` + yyyyMMddHHmmss (in the configured time zone) + the
   * sequence in 6 digits + the shard in 4 digits.
   */
  format(id: bigint | string, prefix = ""): string {
    checkPrefix(prefix);
    const parts = this.layout.decompose(id);
    return this.formatParts(this.epochSecond + parts.ticks, parts.workerId, parts.sequence, prefix);
  }

  /** The string form of the parts of an id; the caller has range-checked them. */
  formatParts(second: number, shard: number, sequence: number, prefix = ""): string {
    const local = new Date((second + this.offsetMinutes * 60) * 1000);
    return (
      prefix +
      pad(local.getUTCFullYear(), 4) +
      pad(local.getUTCMonth() + 1, 2) +
      pad(local.getUTCDate(), 2) +
      pad(local.getUTCHours(), 2) +
      pad(local.getUTCMinutes(), 2) +
      pad(local.getUTCSeconds(), 2) +
      pad(sequence, 6) +
      pad(shard, 4)
    );
  }

  /**
   * Takes an id apart: a bigint, a decimal string (the integer form), or the string form with any
   * prefix. Throws INVALID_ID naming the value when it is neither or does not fit the layout.
   */
  parse(value: bigint | string): ParsedSequenceId {
    if (typeof value === "bigint" || (typeof value === "string" && DECIMAL_ID.test(value))) {
      const parts = this.layout.decompose(value);
      const second = this.epochSecond + parts.ticks;
      return {
        id: parts.id,
        second,
        timestampMs: second * 1000,
        date: new Date(second * 1000),
        shard: parts.workerId,
        sequence: parts.sequence,
        form: "integer",
        prefix: undefined,
      };
    }
    if (typeof value !== "string") throw this.invalid(value, "a bigint or a string");
    const match = STRING_ID.exec(value);
    if (!match) {
      throw this.invalid(
        value,
        "a decimal id of up to 19 digits, or prefix + yyyyMMddHHmmss + 6-digit sequence + 4-digit shard",
      );
    }
    const [, prefix, y, mo, d, h, mi, s, seq, sh] = match as unknown as string[];
    const fields = [y, mo, d, h, mi, s].map(Number) as [
      number,
      number,
      number,
      number,
      number,
      number,
    ];
    const localMs = Date.UTC(fields[0], fields[1] - 1, fields[2], fields[3], fields[4], fields[5]);
    const check = new Date(localMs);
    if (
      check.getUTCFullYear() !== fields[0] ||
      check.getUTCMonth() !== fields[1] - 1 ||
      check.getUTCDate() !== fields[2] ||
      check.getUTCHours() !== fields[3] ||
      check.getUTCMinutes() !== fields[4] ||
      check.getUTCSeconds() !== fields[5]
    ) {
      throw this.invalid(value, "a real date and time in its yyyyMMddHHmmss part");
    }
    const second = localMs / 1000 - this.offsetMinutes * 60;
    const sequence = Number(seq);
    const shard = Number(sh);
    const ticks = second - this.epochSecond;
    if (ticks < 0 || ticks > this.layout.maxTicks) {
      throw this.invalid(
        value,
        `a time from ${new Date(this.layout.epoch).toISOString()} to ` +
          `${new Date(this.layout.lastInstantMs).toISOString()} (layout ${this.layout.name}, time zone ${this.timeZone})`,
      );
    }
    if (sequence > this.layout.maxSequence) {
      throw this.invalid(value, `a sequence of at most ${this.layout.maxSequence}`);
    }
    if (shard > this.layout.maxWorkerId) {
      throw this.invalid(value, `a shard of at most ${this.layout.maxWorkerId}`);
    }
    return {
      id: this.layout.compose({ ticks, workerId: shard, sequence }),
      second,
      timestampMs: second * 1000,
      date: new Date(second * 1000),
      shard,
      sequence,
      form: "string",
      prefix: prefix ?? "",
    };
  }

  private invalid(value: unknown, expected: string): LeafError {
    return new LeafError({
      component: COMPONENT,
      code: ErrorCodes.INVALID_ID,
      message: `invalid redis-sequence id ${describeValue(value)}: expected ${expected}`,
      details: { value: typeof value === "bigint" ? value.toString() : value, expected },
    });
  }
}

/** Checks a string-form prefix: a string of at most 256 characters without control characters. */
export function checkPrefix(prefix: unknown): string {
  if (typeof prefix !== "string" || prefix.length > MAX_PREFIX || hasControlCharacter(prefix)) {
    throw argumentError(
      COMPONENT,
      "prefix",
      prefix,
      `a string of at most ${MAX_PREFIX} characters without control characters`,
    );
  }
  return prefix;
}

function hasControlCharacter(text: string): boolean {
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    if (code < 32 || code === 127) return true;
  }
  return false;
}
