// The checks of the ms options every adapter takes (time limits, tolerances): one wording for all,
// so a bad value reads the same whichever registry or store refused it.
import { configError } from "./errors";

/**
 * Returns `value` when it is a positive safe integer (a time limit in ms); else throws
 * INVALID_CONFIG naming `component`, `key` and the value.
 */
export function positiveMs(component: string, key: string, value: unknown): number {
  if (typeof value !== "number" || !Number.isSafeInteger(value) || value <= 0) {
    throw configError(component, key, value, "a positive integer of ms");
  }
  return value;
}

/**
 * Returns `value` when it is a safe integer of 0 or more (a tolerance in ms); else throws
 * INVALID_CONFIG naming `component`, `key` and the value.
 */
export function nonNegativeMs(component: string, key: string, value: unknown): number {
  if (typeof value !== "number" || !Number.isSafeInteger(value) || value < 0) {
    throw configError(component, key, value, "an integer of 0 or more ms");
  }
  return value;
}
