// CosId's "friendly" form of snowflake ids: `yyyyMMddHHmmssSSS-worker-sequence`, the time in UTC.
// Unlike CosId's, worker and sequence are zero-padded to the layout's widths, so the strings of one
// layout sort as the ids do, and the time is always UTC, so a string means one instant everywhere.
import { argumentError } from "./errors";
import { checkIdPrefix, type IdStringForm, malformedId } from "./id-encoding";
import type { Layout } from "./layout";
import { parseId } from "./layout";

const COMPONENT = "core";
/** 9999-12-31T23:59:59.999Z: the last instant with a four-digit year. */
const LAST_FOUR_DIGIT_YEAR_MS = 253_402_300_799_999;

/** Options of {@link FriendlyIdFormat}. */
export interface FriendlyIdOptions {
  /** The layout of the ids (its epoch, unit and bit widths). */
  layout: Layout;
  /**
   * Written before every id and required by the parser, as in {@link IdEncoding} (default none).
   */
  prefix?: string;
}

/**
 * Writes a snowflake id as `yyyyMMddHHmmssSSS-wwww-ssss` (UTC time of its tick, worker id,
 * sequence; worker and sequence zero-padded to the widths of the layout's largest values) and
 * parses it back. For one layout, lexicographic order of the strings is numeric order of the ids.
 *
 * ```ts
 * const friendly = new FriendlyIdFormat({ layout: layouts.leaf });
 * friendly.encode(1256557484213448722n); // "20200502121344602-0619-0018"
 * friendly.parse("20200502121344602-0619-0018"); // 1256557484213448722n
 * ```
 */
export class FriendlyIdFormat implements IdStringForm {
  readonly name = "friendly";
  readonly layout: Layout;
  readonly prefix: string;
  private readonly workerWidth: number;
  private readonly sequenceWidth: number;
  /** `d` for a digit, `-` for itself, per character after the prefix. */
  private readonly pattern: string;

  constructor(options: FriendlyIdOptions) {
    const layout = options?.layout;
    if (typeof layout?.decompose !== "function") {
      throw argumentError(
        COMPONENT,
        "layout",
        layout,
        "a layout (layouts.leaf, defineLayout(...))",
      );
    }
    const prefix = checkIdPrefix(options.prefix);
    this.layout = layout;
    this.prefix = prefix;
    this.workerWidth = String(layout.maxWorkerId).length;
    this.sequenceWidth = String(layout.maxSequence).length;
    this.pattern = `${"d".repeat(17)}-${"d".repeat(this.workerWidth)}-${"d".repeat(this.sequenceWidth)}`;
  }

  /** `id` in the friendly form. Throws INVALID_ID for an id that does not fit the layout. */
  encode(id: bigint | number): string {
    const parts = this.layout.decompose(typeof id === "number" ? parseId(id) : id);
    if (parts.timestampMs > LAST_FOUR_DIGIT_YEAR_MS) {
      throw argumentError(
        COMPONENT,
        "id",
        id,
        `an id from before the year 10000 (the friendly form writes four-digit years); it is at ${parts.timestampMs} ms`,
      );
    }
    const d = new Date(parts.timestampMs);
    return (
      this.prefix +
      pad(d.getUTCFullYear(), 4) +
      pad(d.getUTCMonth() + 1, 2) +
      pad(d.getUTCDate(), 2) +
      pad(d.getUTCHours(), 2) +
      pad(d.getUTCMinutes(), 2) +
      pad(d.getUTCSeconds(), 2) +
      pad(d.getUTCMilliseconds(), 3) +
      "-" +
      pad(parts.workerId, this.workerWidth) +
      "-" +
      pad(parts.sequence, this.sequenceWidth)
    );
  }

  /**
   * The id `text` stands for. Throws INVALID_ID naming the input and what is wrong: a missing
   * prefix, a character that is not the digit or `-` expected at its index, the wrong length, a
   * date that does not exist, a time outside the layout or off its unit, a worker id or sequence
   * above the layout's.
   */
  parse(text: string): bigint {
    if (typeof text !== "string") throw this.malformed(text, "it is not a string");
    const prefix = this.prefix;
    if (prefix.length > 0 && !text.startsWith(prefix)) {
      throw this.malformed(text, `it does not start with the prefix ${JSON.stringify(prefix)}`);
    }
    const body = text.slice(prefix.length);
    const pattern = this.pattern;
    for (let i = 0; i < body.length && i < pattern.length; i++) {
      const c = body.charCodeAt(i);
      const ok = pattern[i] === "d" ? c >= 48 && c <= 57 : c === 45;
      if (!ok) {
        throw this.malformed(
          text,
          `character ${JSON.stringify(body[i])} at index ${prefix.length + i} should be ${pattern[i] === "d" ? "a digit" : '"-"'}`,
          { position: prefix.length + i, character: body[i] },
        );
      }
    }
    if (body.length !== pattern.length) {
      throw this.malformed(
        text,
        `it has ${body.length} characters after the prefix instead of ${pattern.length}`,
      );
    }
    const num = (from: number, to: number) => Number(body.slice(from, to));
    const [year, month, day] = [num(0, 4), num(4, 6), num(6, 8)];
    const [hour, minute, second, ms] = [num(8, 10), num(10, 12), num(12, 14), num(14, 17)];
    const at = Date.UTC(year, month - 1, day, hour, minute, second, ms);
    const d = new Date(at);
    if (
      year < 1970 ||
      d.getUTCFullYear() !== year ||
      d.getUTCMonth() !== month - 1 ||
      d.getUTCDate() !== day ||
      hour > 23 ||
      minute > 59 ||
      second > 59
    ) {
      throw this.malformed(text, `${body.slice(0, 17)} is not a date and time from 1970 on`);
    }
    const { layout } = this;
    const offset = at - layout.epoch;
    const ticks = offset / layout.unitMillis;
    if (!Number.isInteger(ticks) || ticks < 0 || ticks > layout.maxTicks) {
      throw this.malformed(
        text,
        `its time ${d.toISOString()} is not a tick of layout ${layout.name} (from ${new Date(layout.epoch).toISOString()} to ${new Date(layout.lastInstantMs).toISOString()}, in steps of ${layout.unitMillis} ms)`,
      );
    }
    const workerStart = 18;
    const workerId = num(workerStart, workerStart + this.workerWidth);
    const sequence = num(workerStart + this.workerWidth + 1, body.length);
    if (workerId > layout.maxWorkerId) {
      throw this.malformed(
        text,
        `worker id ${workerId} is above the layout's ${layout.maxWorkerId}`,
      );
    }
    if (sequence > layout.maxSequence) {
      throw this.malformed(
        text,
        `sequence ${sequence} is above the layout's ${layout.maxSequence}`,
      );
    }
    return layout.compose({ ticks, workerId, sequence });
  }

  private malformed(text: unknown, problem: string, extra: Record<string, unknown> = {}) {
    const w = "w".repeat(this.workerWidth);
    const s = "s".repeat(this.sequenceWidth);
    return malformedId("friendly", text, problem, {
      expected: `${this.prefix}yyyyMMddHHmmssSSS-${w}-${s} (UTC time, worker id and sequence of layout ${this.layout.name})`,
      ...extra,
    });
  }
}

function pad(value: number, width: number): string {
  return String(value).padStart(width, "0");
}
