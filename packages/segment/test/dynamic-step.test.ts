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

  it("keeps the step when doubling would pass maxStep, as Java Leaf: 819,200 stays 819,200", () => {
    // Java Leaf (SegmentIDGenImpl): `if (nextStep * 2 > MAX_STEP) { do nothing }`. From a table
    // step of 100, ranges lasting under 15 minutes grow 100, 200, ..., 409,600, 819,200, then stay.
    const steps = [100];
    for (let i = 0; i < 16; i++) steps.push(nextDynamicStep(steps.at(-1)!, 100, 0, leaf));
    expect(steps.slice(-5)).toEqual([409_600, 819_200, 819_200, 819_200, 819_200]);
    expect(nextDynamicStep(800_000, 1000, 0, leaf)).toBe(800_000);
    expect(nextDynamicStep(500_000, 1000, 0, leaf)).toBe(1_000_000);
    const custom = resolveDynamicStep({ maxStep: 64, minStep: 4, segmentDurationMs: 1000 })!;
    expect(nextDynamicStep(40, 10, 10, custom)).toBe(40);
    expect(nextDynamicStep(32, 10, 10, custom)).toBe(64);
  });

  it("keeps the step when halving would fall below the table's step or minStep, as Java Leaf", () => {
    // Java Leaf: `nextStep / 2 >= minStep ? nextStep / 2 : nextStep`, minStep the table's step.
    expect(nextDynamicStep(1000, 1000, 60 * MIN, leaf)).toBe(1000);
    expect(nextDynamicStep(1500, 1000, 60 * MIN, leaf)).toBe(1500);
    expect(nextDynamicStep(2000, 1000, 60 * MIN, leaf)).toBe(1000);
    const custom = resolveDynamicStep({ maxStep: 64, minStep: 4, segmentDurationMs: 1000 })!;
    expect(nextDynamicStep(6, 10, 5000, custom)).toBe(6);
    expect(nextDynamicStep(8, 10, 5000, custom)).toBe(4);
  });

  it("takes a table step raised by hand above the current step at once", () => {
    expect(nextDynamicStep(400, 5000, 20 * MIN, leaf)).toBe(5000);
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
