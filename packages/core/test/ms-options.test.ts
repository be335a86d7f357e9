import { describe, expect, it } from "vitest";
import { nonNegativeMs, positiveMs } from "../src/adapter";
import { ErrorCodes } from "../src/index";

describe("ms option checks", () => {
  it("return a time limit above 0 and a tolerance of 0 or more as they are", () => {
    expect(positiveMs("registry-x", "queryTimeoutMs", 1)).toBe(1);
    expect(nonNegativeMs("registry-x", "toleranceMs", 0)).toBe(0);
  });

  it("refuse anything else with INVALID_CONFIG naming the component, the key and the value", () => {
    for (const value of [0, -1, 1.5, Number.NaN, 2 ** 53, "5", undefined]) {
      expect(() => positiveMs("registry-x", "queryTimeoutMs", value)).toThrow(
        expect.objectContaining({
          code: ErrorCodes.INVALID_CONFIG,
          message: expect.stringMatching(
            /^\[leaf\] \[registry-x\] invalid queryTimeoutMs: .*; expected a positive integer of ms/,
          ),
          details: expect.objectContaining({ key: "queryTimeoutMs" }),
        }),
      );
    }
    for (const value of [-1, 0.5, 2 ** 53, null]) {
      expect(() => nonNegativeMs("registry-x", "toleranceMs", value)).toThrow(
        /\[registry-x\] invalid toleranceMs: .*; expected an integer of 0 or more ms/,
      );
    }
  });
});
