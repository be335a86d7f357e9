// Ids as JS numbers: exact up to Number.MAX_SAFE_INTEGER (2^53 - 1) and refused above it with
// UNSAFE_INTEGER, never rounded. Shared by the snowflake generator and @leaf/segment.
import { ErrorCodes, LeafError } from "./errors";
import type { Layout } from "./layout";

/** Number.MAX_SAFE_INTEGER (2^53 - 1) as a bigint: the largest id a JS number holds exactly. */
export const MAX_SAFE_ID = 9_007_199_254_740_991n;

/**
 * The UNSAFE_INTEGER error for an id above 2^53 - 1 asked for as a number. `what` says whose id it
 * is ("segment tag \"order\""), `instead` what to call instead ("nextIdSync").
 */
export function unsafeIntegerError(
  component: string,
  id: bigint,
  what: string,
  instead: string,
): LeafError {
  return new LeafError({
    component,
    code: ErrorCodes.UNSAFE_INTEGER,
    message:
      `id ${id} of ${what} is above Number.MAX_SAFE_INTEGER (${MAX_SAFE_ID}): a JS number cannot ` +
      `hold it exactly, so it is not handed out as one (it is skipped, never rounded); use ${instead} (bigint) or a string form`,
    details: { id: id.toString(), maxSafe: MAX_SAFE_ID.toString() },
  });
}

/**
 * `id` as a JS number when it is at most 2^53 - 1 (exact); otherwise throws UNSAFE_INTEGER
 * (see {@link unsafeIntegerError}).
 */
export function toSafeNumber(
  id: bigint,
  component = "core",
  what = "the id",
  instead = "the bigint API",
): number {
  if (id > MAX_SAFE_ID) throw unsafeIntegerError(component, id, what, instead);
  return Number(id);
}

/** INVALID_LAYOUT for a JS-number id asked of a layout whose ids can pass 2^53 - 1. */
export function numberLayoutError(component: string, layout: Layout): LeafError {
  const bits = layout.totalBits;
  const maxId = (1n << BigInt(bits)) - 1n;
  return new LeafError({
    component,
    code: ErrorCodes.INVALID_LAYOUT,
    message:
      `layout ${layout.name} does not fit a JS number: it has ${bits} bits (${layout.timestampBits}/` +
      `${layout.workerBits}/${layout.sequenceBits}), so its ids reach ${maxId}, above ` +
      `Number.MAX_SAFE_INTEGER (${MAX_SAFE_ID}). Use nextId() (bigint), or a layout of at most 53 bits ` +
      "(layouts.safe53ms, layouts.safe53s)",
    details: { layout: layout.name, bits, maxId: maxId.toString() },
  });
}
