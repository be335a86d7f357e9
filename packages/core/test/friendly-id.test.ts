// CosId's friendly form (`yyyyMMddHHmmssSSS-worker-sequence`, UTC): round trips and order over
// random ids of every ready-made layout, and a clear refusal of malformed input.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { ErrorCodes, FriendlyIdFormat, isLeafError, type Layout, layouts } from "../src/index";

/** The last tick of `layout` with a four-digit year (the friendly form's limit). */
function lastTick(layout: Layout): number {
  return Math.min(
    layout.maxTicks,
    Math.floor((253_402_300_799_999 - layout.epoch) / layout.unitMillis),
  );
}

const idsOf = (layout: Layout) =>
  fc
    .record({
      ticks: fc.oneof(
        fc.integer({ min: 0, max: lastTick(layout) }),
        fc.constantFrom(0, lastTick(layout)),
      ),
      workerId: fc.oneof(
        fc.integer({ min: 0, max: layout.maxWorkerId }),
        fc.constant(layout.maxWorkerId),
      ),
      sequence: fc.oneof(
        fc.integer({ min: 0, max: layout.maxSequence }),
        fc.constant(layout.maxSequence),
      ),
    })
    .map((parts) => layout.compose(parts));

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

describe.each(Object.entries(layouts))("FriendlyIdFormat with layouts.%s", (_name, layout) => {
  const friendly = new FriendlyIdFormat({ layout });
  const prefixed = new FriendlyIdFormat({ layout, prefix: "ord_" });

  it("round-trips random ids, 0 and the largest", () => {
    fc.assert(
      fc.property(idsOf(layout), (id) => {
        expect(friendly.parse(friendly.encode(id))).toBe(id);
        expect(prefixed.parse(prefixed.encode(id))).toBe(id);
        const parts = layout.decompose(id);
        const worker = String(parts.workerId).padStart(String(layout.maxWorkerId).length, "0");
        const sequence = String(parts.sequence).padStart(String(layout.maxSequence).length, "0");
        expect(friendly.encode(id).slice(17)).toBe(`-${worker}-${sequence}`);
      }),
      { numRuns: 1000 },
    );
  });

  it("sorts the strings as the ids", () => {
    fc.assert(
      fc.property(idsOf(layout), idsOf(layout), (a, b) => {
        const [x, y] = [friendly.encode(a), friendly.encode(b)];
        expect(Math.sign(x < y ? -1 : x > y ? 1 : 0)).toBe(Math.sign(a < b ? -1 : a > b ? 1 : 0));
      }),
      { numRuns: 2000 },
    );
  });
});

describe("FriendlyIdFormat", () => {
  const friendly = new FriendlyIdFormat({ layout: layouts.leaf });

  it("writes the UTC time of the id's tick, then worker id and sequence zero-padded", () => {
    // Java Leaf's README example: 1256557484213448722 = 2020-05-02T12:13:44.602Z, worker 619,
    // sequence 18.
    expect(friendly.encode(1256557484213448722n)).toBe("20200502121344602-0619-0018");
    expect(friendly.encode(0)).toBe("20101104014254657-0000-0000");
    expect(new FriendlyIdFormat({ layout: layouts.safe53s }).encode(0)).toBe(
      "20200101000000000-0000-0000",
    );
  });

  it("refuses malformed strings, naming the index and what was expected there", () => {
    const bad = errorOf(() => friendly.parse("2020050212134460x-0619-0018"));
    expect(bad.code).toBe(ErrorCodes.INVALID_ID);
    expect(bad.message).toContain('character "x" at index 16 should be a digit');
    expect(bad.message).toContain("yyyyMMddHHmmssSSS-wwww-ssss");
    expect(errorOf(() => friendly.parse("20200502121344602_0619-0018")).message).toContain(
      'character "_" at index 17 should be "-"',
    );
    expect(errorOf(() => friendly.parse("20200502121344602-0619-018")).message).toContain(
      "26 characters after the prefix instead of 27",
    );
    expect(errorOf(() => friendly.parse("20200231121344602-0619-0018")).message).toContain(
      "20200231121344602 is not a date and time",
    );
    expect(errorOf(() => friendly.parse("20200502251344602-0619-0018")).message).toContain(
      "is not a date and time",
    );
    expect(errorOf(() => friendly.parse("20000502121344602-0619-0018")).message).toContain(
      "is not a tick of layout leaf",
    );
    expect(errorOf(() => friendly.parse("20200502121344602-1024-0018")).message).toContain(
      "worker id 1024 is above the layout's 1023",
    );
    expect(errorOf(() => friendly.parse("20200502121344602-0619-4096")).message).toContain(
      "sequence 4096 is above the layout's 4095",
    );
    // A seconds layout has no ids off the whole second.
    const seconds = new FriendlyIdFormat({ layout: layouts.safe53s });
    expect(errorOf(() => seconds.parse("20260101000000500-0000-0000")).message).toContain(
      "in steps of 1000 ms",
    );
    const prefixed = new FriendlyIdFormat({ layout: layouts.leaf, prefix: "ord_" });
    expect(errorOf(() => prefixed.parse("20200502121344602-0619-0018")).message).toContain(
      'does not start with the prefix "ord_"',
    );
  });

  it("refuses an id outside the layout and bad options", () => {
    expect(errorOf(() => friendly.encode(1n << 63n)).code).toBe(ErrorCodes.INVALID_ID);
    expect(
      errorOf(() => new FriendlyIdFormat({ layout: layouts.safe53ms }).encode(1n << 53n)).message,
    ).toContain("does not fit layout safe53ms");
    expect(
      errorOf(() => new FriendlyIdFormat({ layout: undefined as unknown as Layout })).code,
    ).toBe(ErrorCodes.INVALID_ARGUMENT);
    expect(
      errorOf(() => new FriendlyIdFormat({ layout: layouts.leaf, prefix: "a b" })).message,
    ).toContain('invalid prefix: "a b"');
  });
});
