import { ErrorCodes } from "@leaf/core";
import { describe, expect, it } from "vitest";
import { nextDynamicStep, resolveDynamicStep } from "../src/index";

const leaf = resolveDynamicStep(true)!;
const MIN = 60_000;

describe("nextDynamicStep", () => {
  it("follows Leaf: doubles under 15 minutes, keeps 15 to 30, halves from 30", () => {
    expect(leaf).toEqual({ maxStep: 1_000_000, minStep: undefined, segmentDurationMs: 15 * MIN });
    expect(nextDynamicStep(1000, 1000, 14 * MIN, leaf)).toBe(2000);
    expect(nextDynamicStep(4000, 1000, 15 * MIN, leaf)).toBe(4000);
    expect(nextDynamicStep(4000, 1000, 29 * MIN, leaf)).toBe(4000);
    expect(nextDynamicStep(4000, 1000, 30 * MIN, leaf)).toBe(2000);
  });

  it("stays within the bounds: up to maxStep, down to the table's step or minStep", () => {
    expect(nextDynamicStep(800_000, 1000, 0, leaf)).toBe(1_000_000);
    expect(nextDynamicStep(1000, 1000, 60 * MIN, leaf)).toBe(1000);
    expect(nextDynamicStep(1500, 1000, 60 * MIN, leaf)).toBe(1000);
    const custom = resolveDynamicStep({ maxStep: 64, minStep: 4, segmentDurationMs: 1000 })!;
    expect(nextDynamicStep(40, 10, 10, custom)).toBe(64);
    expect(nextDynamicStep(6, 10, 5000, custom)).toBe(4);
  });

  it("keeps a table step set above maxStep by hand", () => {
    expect(nextDynamicStep(2_000_000, 2_000_000, 0, leaf)).toBe(2_000_000);
  });

  it("is switched off with false and refuses bad settings naming the key", () => {
    expect(resolveDynamicStep(false)).toBeUndefined();
    expect(() => resolveDynamicStep({ minStep: 10, maxStep: 5 })).toThrow(
      expect.objectContaining({
        code: ErrorCodes.INVALID_CONFIG,
        details: expect.objectContaining({ key: "dynamicStep.minStep" }),
      }),
    );
    expect(() => resolveDynamicStep("yes" as unknown as boolean)).toThrow(/dynamicStep/);
  });
});
