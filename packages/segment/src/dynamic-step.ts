// Leaf's dynamic step: a range used up quickly makes the next one twice as large, a slow one half
// as large, so that the database sees about one write per segment duration whatever the traffic.
import { configError } from "@leaf/core";
import { COMPONENT, MAX_STEP } from "./validation";

/** Options of Leaf's dynamic step. */
export interface DynamicStepOptions {
  /**
   * Bound of the doubling (default 1,000,000, Leaf's MAX_STEP): a step whose double would pass it
   * stays as it is, as in Java Leaf.
   */
  maxStep?: number;
  /**
   * Bound of the halving (default: the tag's step in the store, as Leaf): a step whose half would
   * fall below it stays as it is.
   */
  minStep?: number;
  /**
   * Leaf's SEGMENT_DURATION, in ms (default 15 minutes): when the time since the previous load is
   * under it the step doubles; from 2x it the step halves; in between it stays.
   */
  segmentDurationMs?: number;
}

/** Dynamic-step settings with defaults applied. */
export interface DynamicStep {
  maxStep: number;
  minStep: number | undefined;
  segmentDurationMs: number;
}

/** Checks options (`true` means Leaf's defaults) and applies defaults; `false` gives undefined. */
export function resolveDynamicStep(
  options: boolean | DynamicStepOptions | undefined,
  key = "dynamicStep",
): DynamicStep | undefined {
  if (options === false) return undefined;
  if (
    options !== undefined &&
    options !== true &&
    (options === null || typeof options !== "object")
  ) {
    throw configError(
      COMPONENT,
      key,
      options,
      "true, false or {maxStep?, minStep?, segmentDurationMs?}",
    );
  }
  const given = typeof options === "object" ? options : {};
  const maxStep = given.maxStep ?? 1_000_000;
  const minStep = given.minStep;
  const segmentDurationMs = given.segmentDurationMs ?? 15 * 60_000;
  if (!Number.isInteger(maxStep) || maxStep < 1 || maxStep > MAX_STEP) {
    throw configError(COMPONENT, `${key}.maxStep`, maxStep, `an integer from 1 to ${MAX_STEP}`);
  }
  if (minStep !== undefined && (!Number.isInteger(minStep) || minStep < 1 || minStep > maxStep)) {
    throw configError(
      COMPONENT,
      `${key}.minStep`,
      minStep,
      `an integer from 1 to maxStep (${maxStep})`,
    );
  }
  if (!Number.isFinite(segmentDurationMs) || segmentDurationMs <= 0) {
    throw configError(
      COMPONENT,
      `${key}.segmentDurationMs`,
      segmentDurationMs,
      "a positive number of ms",
    );
  }
  return { maxStep, minStep, segmentDurationMs };
}

/**
 * The step of the next range. `previousStep` is the step of the last range taken, `tableStep` the
 * store's step for the tag, `sinceLastLoadMs` the time since that range was taken. As Java Leaf's
 * SegmentIDGenImpl: under the segment duration the step doubles unless the double passes maxStep,
 * then it stays (from a table step of 100: ..., 409,600, 819,200, 819,200, never 1,000,000); from
 * twice the duration it halves unless the half falls below minStep (default the table's step), then
 * it stays. A table step changed by hand still bounds the result: raised above the current step it
 * is taken at once, and a table step above maxStep is kept.
 */
export function nextDynamicStep(
  previousStep: number,
  tableStep: number,
  sinceLastLoadMs: number,
  settings: DynamicStep,
): number {
  const floor = Math.max(settings.minStep ?? tableStep, 1);
  const ceiling = Math.min(Math.max(settings.maxStep, tableStep), MAX_STEP);
  let step = previousStep;
  if (sinceLastLoadMs < settings.segmentDurationMs) {
    if (previousStep * 2 <= ceiling) step = previousStep * 2;
  } else if (sinceLastLoadMs >= settings.segmentDurationMs * 2) {
    const half = Math.floor(previousStep / 2);
    if (half >= floor) step = half;
  }
  return Math.min(Math.max(step, floor), ceiling);
}
