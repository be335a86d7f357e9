// The fixed-width string forms (base62, base36, Crockford base32, with or without a prefix): round
// trips and order over random ids from 0 to the largest, and a clear refusal of malformed input.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { ErrorCodes, type IdAlphabet, IdEncoding, isLeafError } from "../src/index";

const ALPHABETS: IdAlphabet[] = ["base62", "base36", "base32"];
const MAX63 = (1n << 63n) - 1n;
const MAX53 = (1n << 53n) - 1n;

/** Ids from 0 to `max`, with 0, `max` and their neighbours drawn often. */
const ids = (max: bigint) =>
  fc.oneof(
    fc.bigInt({ min: 0n, max }),
    fc.constantFrom(
      0n,
      1n,
      max - 1n,
      max,
      MAX53 < max ? MAX53 : max,
      MAX53 + 1n <= max ? MAX53 + 1n : max,
    ),
  );

function errorOf(fn: () => unknown): {
  code: string;
  message: string;
  details: Record<string, unknown>;
} {
  try {
    fn();
  } catch (error) {
    if (isLeafError(error))
      return { code: error.code, message: error.message, details: error.details };
    throw error;
  }
  throw new Error("expected an error");
}

const byString = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);
const byBigint = (a: bigint, b: bigint) => (a < b ? -1 : a > b ? 1 : 0);

describe.each(ALPHABETS)("IdEncoding %s", (alphabet) => {
  for (const [bits, max] of [
    [63, MAX63],
    [53, MAX53],
  ] as const) {
    for (const prefix of ["", "ord_"]) {
      const encoding = new IdEncoding({ alphabet, bits, prefix });

      it(`round-trips every id from 0 to 2^${bits} - 1 (prefix ${JSON.stringify(prefix)})`, () => {
        fc.assert(
          fc.property(ids(max), (id) => {
            const text = encoding.encode(id);
            expect(text.length).toBe(prefix.length + encoding.width);
            expect(text.startsWith(prefix)).toBe(true);
            expect(encoding.parse(text)).toBe(id);
          }),
          { numRuns: 2000 },
        );
      });

      it(`sorts the strings as the ids (bits ${bits}, prefix ${JSON.stringify(prefix)})`, () => {
        fc.assert(
          fc.property(fc.array(ids(max), { minLength: 2, maxLength: 60 }), (drawn) => {
            const numeric = [...drawn].sort(byBigint);
            const lexicographic = drawn.map((id) => encoding.encode(id)).sort(byString);
            expect(lexicographic.map((text) => encoding.parse(text))).toEqual(numeric);
          }),
          { numRuns: 500 },
        );
        fc.assert(
          fc.property(ids(max), ids(max), (a, b) => {
            const [x, y] = [encoding.encode(a), encoding.encode(b)];
            expect(Math.sign(byString(x, y))).toBe(Math.sign(byBigint(a, b)));
            // Byte order too (what a database with a binary collation compares).
            expect(Math.sign(Buffer.compare(Buffer.from(x), Buffer.from(y)))).toBe(
              Math.sign(byBigint(a, b)),
            );
          }),
          { numRuns: 2000 },
        );
      });
    }
  }

  it("encodes a safe-integer number exactly as the same id as a bigint", () => {
    const encoding = new IdEncoding({ alphabet });
    fc.assert(
      fc.property(fc.integer({ min: 0, max: Number.MAX_SAFE_INTEGER }), (n) => {
        expect(encoding.encode(n)).toBe(encoding.encode(BigInt(n)));
        expect(encoding.parseNumber(encoding.encode(n))).toBe(n);
      }),
      { numRuns: 2000 },
    );
  });

  it("refuses ids it cannot hold: negative, fractional, unsafe numbers, above 2^bits - 1", () => {
    const encoding = new IdEncoding({ alphabet, bits: 53 });
    for (const bad of [-1, -1n, 1.5, 2 ** 53, MAX53 + 1n, Number.NaN]) {
      const error = errorOf(() => encoding.encode(bad as bigint));
      expect(error.code).toBe(ErrorCodes.INVALID_ARGUMENT);
      expect(error.message).toContain("from 0 to 9007199254740991 (53 bits)");
    }
    expect(errorOf(() => new IdEncoding({ alphabet }).encode(MAX63 + 1n)).code).toBe(
      ErrorCodes.INVALID_ARGUMENT,
    );
  });

  it("refuses a string that is not one of its ids, naming the problem and the expected form", () => {
    const encoding = new IdEncoding({ alphabet, prefix: "ord_" });
    const good = encoding.encode(123456789n);
    const missing = errorOf(() => encoding.parse(good.slice(4)));
    expect(missing.code).toBe(ErrorCodes.INVALID_ID);
    expect(missing.message).toContain('does not start with the prefix "ord_"');
    const short = errorOf(() => encoding.parse(good.slice(0, -1)));
    expect(short.message).toContain(
      `${encoding.width - 1} characters after the prefix instead of ${encoding.width}`,
    );
    const long = errorOf(() => encoding.parse(`${good}0`));
    expect(long.message).toContain(`instead of ${encoding.width}`);
    const bad = `${good.slice(0, 7)}!${good.slice(8)}`;
    const character = errorOf(() => encoding.parse(bad));
    expect(character.message).toContain('character "!" at index 7 is not');
    expect(character.details).toMatchObject({ position: 7, character: "!" });
    // The largest string of the width stands for more than 63 bits.
    const top = errorOf(() =>
      encoding.parse(
        `ord_${encoding
          .encode(MAX63)
          .slice(4)
          .replace(/./g, alphabet === "base62" ? "z" : alphabet === "base36" ? "z" : "Z")}`,
      ),
    );
    expect(top.message).toContain("above the largest id 9223372036854775807 (63 bits)");
    const notString = errorOf(() => encoding.parse(42 as unknown as string));
    expect(notString.message).toContain("it is not a string");
  });

  it("reports an id above 2^53 - 1 asked for as a number as UNSAFE_INTEGER, not rounded", () => {
    const encoding = new IdEncoding({ alphabet });
    expect(encoding.parseNumber(encoding.encode(MAX53))).toBe(Number.MAX_SAFE_INTEGER);
    const error = errorOf(() => encoding.parseNumber(encoding.encode(MAX53 + 1n)));
    expect(error.code).toBe(ErrorCodes.UNSAFE_INTEGER);
    expect(error.message).toContain("9007199254740992");
  });
});

describe("IdEncoding specifics", () => {
  it("has the widths of 63-bit and 53-bit ids", () => {
    const widths = (bits: number) =>
      ALPHABETS.map((alphabet) => new IdEncoding({ alphabet, bits }).width);
    expect(widths(63)).toEqual([11, 13, 13]);
    expect(widths(53)).toEqual([9, 11, 11]);
  });

  it("writes base62 case-sensitively, base36 in lower case, base32 in Crockford's upper case", () => {
    expect(new IdEncoding({ alphabet: "base62" }).encode(MAX63)).toBe("AzL8n0Y58m7");
    expect(new IdEncoding({ alphabet: "base36" }).encode(MAX63)).toBe("1y2p0ij32e8e7");
    expect(new IdEncoding({ alphabet: "base32" }).encode(MAX63)).toBe("7ZZZZZZZZZZZZ");
    expect(new IdEncoding({ alphabet: "base62", prefix: "ord_" }).encode(61n)).toBe(
      "ord_0000000000z",
    );
  });

  it("reads Crockford's lower case and look-alikes (i, l as 1; o as 0) and refuses U", () => {
    const base32 = new IdEncoding({ alphabet: "base32" });
    const id = 0x1234567890abcdefn & MAX63;
    const text = base32.encode(id);
    expect(base32.parse(text.toLowerCase())).toBe(id);
    expect(base32.parse("000000000000I")).toBe(1n);
    expect(base32.parse("000000000000l")).toBe(1n);
    expect(base32.parse("00000000000o1")).toBe(1n);
    const error = errorOf(() => base32.parse("000000000000U"));
    expect(error.message).toContain('character "U" at index 12 is not Crockford base32');
  });

  it("reads base36 in upper case too, and base62 only in its own case", () => {
    const base36 = new IdEncoding({ alphabet: "base36" });
    expect(base36.parse("00000000000ZZ")).toBe(36n * 36n - 1n);
    const base62 = new IdEncoding({ alphabet: "base62" });
    expect(base62.parse("0000000000a")).toBe(36n);
    expect(base62.parse("0000000000A")).toBe(10n);
    expect(errorOf(() => base62.parse("0000000000é")).message).toContain('"é" at index 10');
  });

  it("refuses bad options, naming the option", () => {
    expect(errorOf(() => new IdEncoding({ alphabet: "base64" as IdAlphabet })).message).toContain(
      'invalid alphabet: "base64"; expected "base62", "base36" or "base32"',
    );
    expect(errorOf(() => new IdEncoding({ alphabet: "base62", bits: 64 })).message).toContain(
      "invalid bits: 64",
    );
    expect(
      errorOf(() => new IdEncoding({ alphabet: "base62", prefix: "ord id" })).message,
    ).toContain('invalid prefix: "ord id"');
  });
});
