import { defineLayout, ErrorCodes, isLeafError, layouts } from "@leaf/core";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { SequenceIdFormat } from "../src/index";

const SECOND = Date.UTC(2026, 0, 2, 3, 4, 5) / 1000;

function codeOf(run: () => unknown): string | undefined {
  try {
    run();
  } catch (error) {
    if (isLeafError(error)) return error.code;
    throw error;
  }
  return undefined;
}

describe("SequenceIdFormat", () => {
  const utc = new SequenceIdFormat();

  it("packs second, shard and sequence as 32 + 12 + 19 bits after the sign bit", () => {
    const id = utc.compose(SECOND, 7, 123);
    const ticks = BigInt(SECOND - Date.UTC(2020, 0, 1) / 1000);
    expect(id).toBe((ticks << 31n) | (7n << 19n) | 123n);
    expect(utc.compose(SECOND, 4095, 524_287) < 2n ** 63n).toBe(true);
  });

  it("writes the string form as prefix, yyyyMMddHHmmss, 6-digit sequence and 4-digit shard", () => {
    const id = utc.compose(SECOND, 7, 123);
    expect(utc.format(id)).toBe("202601020304050001230007");
    expect(utc.format(id, "ORD")).toBe("ORD202601020304050001230007");
    expect(utc.format(id.toString(), "ORD")).toBe("ORD202601020304050001230007");
  });

  it("writes the time in the configured time zone", () => {
    const id = utc.compose(SECOND, 7, 123);
    expect(new SequenceIdFormat({ timeZone: "+08:00" }).format(id)).toBe(
      "202601021104050001230007",
    );
    expect(new SequenceIdFormat({ timeZone: "Asia/Shanghai" }).format(id)).toBe(
      "202601021104050001230007",
    );
    expect(new SequenceIdFormat({ timeZone: "-05:30" }).format(id)).toBe(
      "202601012134050001230007",
    );
  });

  it("parses both forms back to the same id, second, shard and sequence", () => {
    const shanghai = new SequenceIdFormat({ timeZone: "Asia/Shanghai" });
    const id = shanghai.compose(SECOND, 42, 65_000);
    const fromString = shanghai.parse(shanghai.format(id, "A1-"));
    const fromBigint = shanghai.parse(id);
    const fromDecimal = shanghai.parse(id.toString());
    for (const parsed of [fromString, fromBigint, fromDecimal]) {
      expect(parsed).toMatchObject({ id, second: SECOND, shard: 42, sequence: 65_000 });
      expect(parsed.date.toISOString()).toBe("2026-01-02T03:04:05.000Z");
    }
    expect(fromString).toMatchObject({ form: "string", prefix: "A1-" });
    expect(fromBigint).toMatchObject({ form: "integer", prefix: undefined });
  });

  it("round-trips every id of the layout through both forms in any fixed time zone", () => {
    const zones = ["UTC", "+08:00", "-05:30", "+14:00", "-12:00"].map(
      (timeZone) => new SequenceIdFormat({ timeZone }),
    );
    const layout = layouts.redisSequence;
    const first = layout.epoch / 1000;
    fc.assert(
      fc.property(
        fc.integer({ min: first, max: first + layout.maxTicks }),
        fc.integer({ min: 0, max: layout.maxWorkerId }),
        fc.integer({ min: 0, max: layout.maxSequence }),
        fc.constantFrom(...zones),
        fc.string({ maxLength: 12 }).filter((p) => [...p].every((c) => c >= " " && c !== "\x7f")),
        (second, shard, sequence, format, prefix) => {
          const id = format.compose(second, shard, sequence);
          const text = format.format(id, prefix);
          const parsed = format.parse(text);
          return (
            parsed.id === id &&
            parsed.second === second &&
            parsed.shard === shard &&
            parsed.sequence === sequence &&
            parsed.prefix === prefix &&
            format.parse(id).second === second
          );
        },
      ),
      { numRuns: 2000 },
    );
  });

  it("refuses strings that are not an id, naming the value", () => {
    const bad = [
      "",
      "12345678901234567890", // 20 digits: too long for an integer id, too short for the string form
      "202601320304050001230007", // January 32nd
      "202602300304050001230007", // February 30th
      "202601022404050001230007", // hour 24
      "201912312359590001230007", // before the layout's epoch (2020-01-01Z)
      "202601020304059999990007", // sequence above 524,287
      "202601020304050001239999", // shard above 4095
      "ORD20260102030405000123000x",
      "-5",
    ];
    for (const value of bad) {
      expect(codeOf(() => utc.parse(value))).toBe(ErrorCodes.INVALID_ID);
    }
    try {
      utc.parse("202601320304050001230007");
    } catch (error) {
      expect(String(error)).toContain('"202601320304050001230007"');
      expect(String(error)).toContain("yyyyMMddHHmmss");
    }
    expect(codeOf(() => utc.parse(-1n))).toBe(ErrorCodes.INVALID_ID);
    expect(codeOf(() => utc.parse(2n ** 63n))).toBe(ErrorCodes.INVALID_ID);
    expect(codeOf(() => utc.parse(12 as unknown as string))).toBe(ErrorCodes.INVALID_ID);
  });

  it("refuses a time zone with daylight saving time, whose local hour repeats", () => {
    try {
      new SequenceIdFormat({ timeZone: "America/New_York" });
      expect.unreachable();
    } catch (error) {
      expect(isLeafError(error, ErrorCodes.INVALID_CONFIG)).toBe(true);
      expect(String(error)).toContain("America/New_York");
      expect(String(error)).toContain("-05:00");
      expect(String(error)).toContain("-04:00");
    }
    expect(codeOf(() => new SequenceIdFormat({ timeZone: "Europe/Berlin" }))).toBe(
      ErrorCodes.INVALID_CONFIG,
    );
    expect(codeOf(() => new SequenceIdFormat({ timeZone: "Mars/Olympus" }))).toBe(
      ErrorCodes.INVALID_CONFIG,
    );
    expect(codeOf(() => new SequenceIdFormat({ timeZone: "+15:00" }))).toBe(
      ErrorCodes.INVALID_CONFIG,
    );
  });

  it("refuses layouts whose unit is not a second or whose parts do not fit the string form", () => {
    const base = { timestampBits: 32, workerBits: 12, sequenceBits: 19, unitMillis: 1000 };
    const cases: [object, string][] = [
      [layouts.leaf, "layout.unitMillis"],
      [defineLayout({ ...base, epoch: Date.UTC(2020, 0, 1) + 500 }), "layout.epoch"],
      [
        defineLayout({ ...base, sequenceBits: 20, timestampBits: 31, epoch: 0 }),
        "layout.sequenceBits",
      ],
      [defineLayout({ ...base, workerBits: 14, timestampBits: 30, epoch: 0 }), "layout.workerBits"],
      [{ name: "not a layout" }, "layout"],
    ];
    for (const [layout, key] of cases) {
      try {
        new SequenceIdFormat({ layout: layout as never });
        expect.unreachable();
      } catch (error) {
        expect(isLeafError(error, ErrorCodes.INVALID_CONFIG)).toBe(true);
        expect((error as { details: { key: string } }).details.key).toBe(key);
      }
    }
  });

  it("accepts a smaller layout and checks parts against it", () => {
    const small = new SequenceIdFormat({
      layout: defineLayout({
        timestampBits: 32,
        workerBits: 4,
        sequenceBits: 4,
        unitMillis: 1000,
        epoch: Date.UTC(2020, 0, 1),
      }),
    });
    const id = small.compose(SECOND, 15, 15);
    expect(small.parse(small.format(id))).toMatchObject({ id, shard: 15, sequence: 15 });
    expect(codeOf(() => small.compose(SECOND, 16, 0))).toBe(ErrorCodes.INVALID_ARGUMENT);
    expect(codeOf(() => small.parse("202601020304050000160000"))).toBe(ErrorCodes.INVALID_ID);
  });

  it("refuses a prefix with control characters", () => {
    const id = utc.compose(SECOND, 1, 1);
    expect(codeOf(() => utc.format(id, "a\nb"))).toBe(ErrorCodes.INVALID_ARGUMENT);
    expect(codeOf(() => utc.format(id, "x".repeat(257)))).toBe(ErrorCodes.INVALID_ARGUMENT);
  });
});
