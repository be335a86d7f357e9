import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { defineLayout, ErrorCodes, type LayoutName, layouts, parseId } from "../src/index";

describe("layouts", () => {
  it("decodes the seed's test vector with Leaf's layout", () => {
    const decoded = layouts.leaf.decompose("1256557484213448722");
    expect(decoded.timestampMs).toBe(1588421624602);
    expect(decoded.date.toISOString()).toBe("2020-05-02T12:13:44.602Z");
    expect(decoded.workerId).toBe(619);
    expect(decoded.sequence).toBe(18);
  });

  for (const name of Object.keys(layouts) as LayoutName[]) {
    it(`decodes what it composes for every part of the ${name} layout`, () => {
      const layout = layouts[name];
      fc.assert(
        fc.property(
          fc.integer({ min: 0, max: layout.maxTicks }),
          fc.integer({ min: 0, max: layout.maxWorkerId }),
          fc.integer({ min: 0, max: layout.maxSequence }),
          (ticks, workerId, sequence) => {
            const id = layout.compose({ ticks, workerId, sequence });
            expect(id).toBeGreaterThanOrEqual(0n);
            expect(id).toBeLessThan(1n << 63n);
            const back = layout.decompose(id);
            expect([back.ticks, back.workerId, back.sequence]).toEqual([ticks, workerId, sequence]);
            expect(layout.decompose(id.toString()).id).toBe(id);
          },
        ),
      );
    });
  }

  it("knows each preset's last instant", () => {
    expect(new Date(layouts.leaf.lastInstantMs).toISOString()).toBe("2080-07-10T17:30:30.208Z");
    expect(new Date(layouts.baidu.lastInstantMs).toISOString().slice(0, 10)).toBe("2024-11-20");
    expect(layouts.redisSequence.idsPerSecondPerWorker).toBe(524_288);
    expect(layouts.leaf.idsPerSecondPerWorker).toBe(4_096_000);
  });

  it("refuses a layout of more than 63 bits, naming the field", () => {
    expect(() =>
      defineLayout({
        timestampBits: 42,
        workerBits: 10,
        sequenceBits: 12,
        unitMillis: 1,
        epoch: 0,
      }),
    ).toThrow(/invalid layout bits: 42\+10\+12=64; expected at most 63 bits/);
  });

  it("refuses an epoch in the future", () => {
    const now = Date.UTC(2026, 0, 1);
    expect(() =>
      defineLayout(
        { timestampBits: 41, workerBits: 10, sequenceBits: 12, unitMillis: 1, epoch: now + 1 },
        now,
      ),
    ).toThrow(/invalid layout epoch: .*not in the future/);
  });

  it("refuses malformed fields with the field's name", () => {
    const base = { timestampBits: 41, workerBits: 10, sequenceBits: 12, unitMillis: 1, epoch: 0 };
    expect(() => defineLayout({ ...base, unitMillis: 0 })).toThrow(/unitMillis: 0/);
    expect(() => defineLayout({ ...base, workerBits: 2.5 })).toThrow(/workerBits: 2.5/);
    expect(() => defineLayout({ ...base, epoch: -1 })).toThrow(/epoch: -1/);
    expect(() => defineLayout({ ...base, sequenceBits: 0 })).toThrow(
      expect.objectContaining({
        code: ErrorCodes.INVALID_LAYOUT,
        details: expect.objectContaining({ key: "sequenceBits" }),
      }),
    );
  });

  it("range-checks every part when composing", () => {
    expect(() => layouts.leaf.compose({ ticks: 0, workerId: 1024, sequence: 0 })).toThrow(
      /invalid workerId: 1024; expected an integer from 0 to 1023/,
    );
    expect(() => layouts.leaf.compose({ ticks: 2 ** 41, workerId: 0, sequence: 0 })).toThrow(
      /ticks/,
    );
    expect(() => layouts.leaf.compose({ ticks: 0, workerId: 0, sequence: -1 })).toThrow(/sequence/);
  });
});

describe("parseId", () => {
  it("reads decimal strings and bigints exactly, above 2^53 too", () => {
    expect(parseId("9223372036854775807")).toBe(9223372036854775807n);
    expect(parseId(9007199254740993n)).toBe(9007199254740993n);
    expect(parseId(42)).toBe(42n);
  });

  it("rejects anything that is not a 63-bit non-negative integer, naming the value", () => {
    for (const bad of [
      "",
      "-1",
      "1.5",
      "0x10",
      " 1",
      "9223372036854775808",
      "abc",
      2 ** 60,
      -3,
      null,
    ]) {
      expect(() => parseId(bad)).toThrow(
        /invalid id .*expected a decimal integer from 0 to 9223372036854775807/,
      );
    }
  });

  it("rejects an id with more bits than the layout has", () => {
    const small = defineLayout({
      name: "small",
      timestampBits: 30,
      workerBits: 5,
      sequenceBits: 5,
      unitMillis: 1000,
      epoch: 0,
    });
    expect(() => small.decompose(1n << 40n)).toThrow(
      /id 1099511627776 does not fit layout small: it has more than 40 bits/,
    );
  });
});
