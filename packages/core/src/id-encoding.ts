// Fixed-width string forms of ids in base62, base36 and Crockford base32, with an optional prefix
// (`ord_...`). Every alphabet is in ascending character-code order and every id is padded to one
// width, so sorting the strings (byte or UTF-16 order) sorts the ids numerically.
import { argumentError, ErrorCodes, LeafError } from "./errors";
import { MAX_SAFE_ID, unsafeIntegerError } from "./safe-number";

const COMPONENT = "core";

/** The alphabets of {@link IdEncoding}. */
export type IdAlphabet = "base62" | "base36" | "base32";

interface AlphabetSpec {
  /** Digits in value order; also ascending character-code order. */
  digits: string;
  /** For messages. */
  described: string;
  /** Extra characters the parser reads (other case, Crockford's look-alikes), with their value. */
  aliases: Record<string, number>;
}

function lowerCaseAliases(upper: string): Record<string, number> {
  const aliases: Record<string, number> = {};
  for (let i = 0; i < upper.length; i++) {
    const c = upper[i]!;
    if (c !== c.toLowerCase()) aliases[c.toLowerCase()] = i;
  }
  return aliases;
}

const CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";
const BASE36 = "0123456789abcdefghijklmnopqrstuvwxyz";

const ALPHABETS: Record<IdAlphabet, AlphabetSpec> = {
  base62: {
    digits: "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz",
    described: "base62 (0-9, A-Z, a-z; case matters)",
    aliases: {},
  },
  base36: {
    digits: BASE36,
    described: "base36 (0-9, a-z; upper case is read too)",
    aliases: Object.fromEntries([...BASE36.slice(10)].map((c, i) => [c.toUpperCase(), i + 10])),
  },
  base32: {
    digits: CROCKFORD,
    described:
      "Crockford base32 (0-9 and A-Z without I, L, O, U; lower case, and i, l as 1 and o as 0, are read too)",
    aliases: { ...lowerCaseAliases(CROCKFORD), I: 1, i: 1, L: 1, l: 1, O: 0, o: 0 },
  },
};

const PREFIX = /^[A-Za-z0-9_.:-]{0,32}$/;

/** Checks a string form's prefix (default ""): INVALID_ARGUMENT naming it unless it is allowed. */
export function checkIdPrefix(value: unknown): string {
  const prefix = value ?? "";
  if (typeof prefix !== "string" || !PREFIX.test(prefix)) {
    throw argumentError(
      COMPONENT,
      "prefix",
      prefix,
      "up to 32 characters, each a letter, a digit, _, -, . or :",
    );
  }
  return prefix;
}
const MAX_SAFE = Number.MAX_SAFE_INTEGER;

/** Options of {@link IdEncoding}. */
export interface IdEncodingOptions {
  /** "base62" (0-9A-Za-z), "base36" (0-9a-z) or "base32" (Crockford: 0-9A-Z without I, L, O, U). */
  alphabet: IdAlphabet;
  /**
   * Bits of the largest id to encode, 1 to 63 (default 63: any id). It fixes the width: 63 bits
   * take 11 base62, 13 base36 or 13 base32 characters; 53 bits (ids that fit a JS number) take 9,
   * 11 or 11. Larger ids are refused.
   */
  bits?: number;
  /**
   * Written before every id and required by the parser, e.g. `"ord_"` (as Stripe ids and TypeID):
   * up to 32 letters, digits, `_`, `-`, `.` or `:` (default none).
   */
  prefix?: string;
}

/** A string form of ids: {@link IdEncoding} and {@link FriendlyIdFormat} both are one. */
export interface IdStringForm {
  /** Short name for messages ("base62", "friendly", ...). */
  readonly name: string;
  /** The id as a string. Throws INVALID_ARGUMENT for an id the form cannot hold. */
  encode(id: bigint | number): string;
  /** The id a string stands for. Throws INVALID_ID naming what is wrong with it. */
  parse(text: string): bigint;
}

/**
 * Encodes ids as fixed-width strings and parses them back. Lexicographic order of the strings is
 * the numeric order of the ids (for one encoding: same alphabet, width and prefix).
 *
 * ```ts
 * const orders = new IdEncoding({ alphabet: "base62", prefix: "ord_" });
 * orders.encode(1967871834224398336n); // "ord_2LMsBBgGSCe"
 * orders.parse("ord_2LMsBBgGSCe"); // 1967871834224398336n
 * ```
 */
export class IdEncoding implements IdStringForm {
  readonly name: IdAlphabet;
  readonly alphabet: IdAlphabet;
  readonly prefix: string;
  readonly bits: number;
  /** Characters of every encoded id, prefix not counted. */
  readonly width: number;
  /** The largest id this encoding takes (2^bits - 1). */
  readonly maxId: bigint;
  private readonly base: number;
  private readonly digits: string[];
  /** Value of each character code below 128 (-1: not in the alphabet). */
  private readonly values: Int8Array;
  /** Characters of the low part: each part's value stays below 2^53, so numbers do the work. */
  private readonly lowWidth: number;
  private readonly lowBase: number;
  private readonly lowBaseBig: bigint;
  private readonly maxIdNumber: number;
  /** Every two-digit string, by value (base^2 of them), and base^2. */
  private readonly pairs: string[];
  private readonly square: number;

  constructor(options: IdEncodingOptions) {
    const alphabet = options?.alphabet;
    if (!Object.hasOwn(ALPHABETS, alphabet)) {
      throw argumentError(COMPONENT, "alphabet", alphabet, '"base62", "base36" or "base32"');
    }
    const spec = ALPHABETS[alphabet];
    const bits = options.bits ?? 63;
    if (!Number.isInteger(bits) || bits < 1 || bits > 63) {
      throw argumentError(
        COMPONENT,
        "bits",
        bits,
        "an integer from 1 to 63 (bits of the largest id)",
      );
    }
    const prefix = checkIdPrefix(options.prefix);
    this.name = alphabet;
    this.alphabet = alphabet;
    this.prefix = prefix;
    this.bits = bits;
    this.maxId = (1n << BigInt(bits)) - 1n;
    this.maxIdNumber = this.maxId > MAX_SAFE_ID ? MAX_SAFE : Number(this.maxId);
    this.base = spec.digits.length;
    this.digits = [...spec.digits];
    let width = 1;
    while (BigInt(this.base) ** BigInt(width) <= this.maxId) width++;
    this.width = width;
    this.lowWidth = Math.ceil(width / 2);
    this.lowBase = this.base ** this.lowWidth;
    this.lowBaseBig = BigInt(this.lowBase);
    this.square = this.base * this.base;
    this.pairs = Array.from(
      { length: this.square },
      (_, v) => this.digits[Math.floor(v / this.base)]! + this.digits[v % this.base]!,
    );
    this.values = new Int8Array(128).fill(-1);
    for (let i = 0; i < this.base; i++) this.values[spec.digits.charCodeAt(i)] = i;
    for (const [c, v] of Object.entries(spec.aliases)) this.values[c.charCodeAt(0)] = v;
  }

  /**
   * `id` as `prefix` + `width` characters. Takes a bigint, or a number that is a safe integer;
   * throws INVALID_ARGUMENT for a negative id, a non-integer, or one above {@link maxId}.
   */
  encode(id: bigint | number): string {
    let hi: number;
    let lo: number;
    if (typeof id === "number") {
      if (!Number.isSafeInteger(id) || id < 0 || id > this.maxIdNumber) throw this.badId(id);
      hi = Math.floor(id / this.lowBase);
      lo = id - hi * this.lowBase;
    } else if (typeof id === "bigint" && id >= 0n && id <= this.maxId) {
      if (id <= MAX_SAFE_ID) {
        const n = Number(id);
        hi = Math.floor(n / this.lowBase);
        lo = n - hi * this.lowBase;
      } else {
        hi = Number(id / this.lowBaseBig);
        lo = Number(id % this.lowBaseBig);
      }
    } else {
      throw this.badId(id);
    }
    return (
      this.prefix + this.digitsOf(hi, this.width - this.lowWidth) + this.digitsOf(lo, this.lowWidth)
    );
  }

  /** `value` (below base^count) as exactly `count` digits, two at a time from a table. */
  private digitsOf(value: number, count: number): string {
    const pairs = this.pairs;
    const square = this.square;
    let out = "";
    let left = count;
    while (left >= 2) {
      const q = Math.floor(value / square);
      out = pairs[value - q * square]! + out;
      value = q;
      left -= 2;
    }
    return left === 1 ? this.digits[value]! + out : out;
  }

  /**
   * The id `text` stands for. Throws INVALID_ID naming the input and what is wrong: a missing
   * prefix, the wrong length, the first character outside the alphabet (with its position), or a
   * value above {@link maxId}.
   */
  parse(text: string): bigint {
    const n = this.parseParts(text);
    if (typeof n === "number") return BigInt(n);
    return n;
  }

  /**
   * {@link parse}, as a JS number; throws UNSAFE_INTEGER when the id is above 2^53 - 1 (an encoding
   * with `bits` of 53 or less never is).
   */
  parseNumber(text: string): number {
    const n = this.parseParts(text);
    if (typeof n === "number") return n;
    throw unsafeIntegerError(COMPONENT, n, `${this.name} string ${JSON.stringify(text)}`, "parse");
  }

  /** The id as a number when it is at most 2^53 - 1, else as a bigint. */
  private parseParts(text: string): number | bigint {
    if (typeof text !== "string") throw this.malformed(text, "it is not a string");
    const prefix = this.prefix;
    if (prefix.length > 0 && !text.startsWith(prefix)) {
      throw this.malformed(text, `it does not start with the prefix ${JSON.stringify(prefix)}`);
    }
    const start = prefix.length;
    const end = start + this.width;
    const values = this.values;
    const base = this.base;
    let hi = 0;
    let lo = 0;
    const split = end - this.lowWidth;
    for (let i = start; i < end && i < text.length; i++) {
      const code = text.charCodeAt(i);
      const v = code < 128 ? values[code]! : -1;
      if (v < 0) {
        throw this.malformed(
          text,
          `character ${JSON.stringify(text[i])} at index ${i} is not ${ALPHABETS[this.alphabet].described}`,
          { position: i, character: text[i] },
        );
      }
      if (i < split) hi = hi * base + v;
      else lo = lo * base + v;
    }
    if (text.length !== end) {
      throw this.malformed(
        text,
        `it has ${text.length - start} characters after the prefix instead of ${this.width}`,
      );
    }
    const n = hi * this.lowBase + lo;
    if (n <= this.maxIdNumber) return n;
    const id = BigInt(hi) * this.lowBaseBig + BigInt(lo);
    if (id > this.maxId) {
      throw this.malformed(
        text,
        `it stands for ${id}, above the largest id ${this.maxId} (${this.bits} bits)`,
      );
    }
    return id;
  }

  private badId(id: unknown): LeafError {
    return argumentError(
      COMPONENT,
      "id",
      id,
      `an integer from 0 to ${this.maxId} (${this.bits} bits) to encode in ${this.name}`,
    );
  }

  private malformed(
    text: unknown,
    problem: string,
    extra: Record<string, unknown> = {},
  ): LeafError {
    return malformedId(this.name, text, problem, {
      expected: `${this.prefix}${"x".repeat(this.width)}: ${this.prefix ? `the prefix ${JSON.stringify(this.prefix)}, then ` : ""}${this.width} characters of ${ALPHABETS[this.alphabet].described}`,
      ...extra,
    });
  }
}

/** INVALID_ID for a string that is not a valid `form` id; shared with the friendly form. */
export function malformedId(
  form: string,
  text: unknown,
  problem: string,
  details: Record<string, unknown> & { expected: string },
): LeafError {
  const shown =
    typeof text === "string"
      ? JSON.stringify(text.length > 60 ? `${text.slice(0, 60)}...` : text)
      : String(text);
  return new LeafError({
    component: COMPONENT,
    code: ErrorCodes.INVALID_ID,
    message: `invalid ${form} id ${shown}: ${problem}; expected ${details.expected}`,
    details: {
      form,
      input: typeof text === "string" ? text.slice(0, 200) : String(text),
      ...details,
    },
  });
}
