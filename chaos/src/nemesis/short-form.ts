// The short form `pnpm test` runs: a few families with fixed seeds (each schedule is printed as it
// runs). Faults that still find duplicates on today's code (issue 24, not fixed yet) are excluded
// here, and listed in the README; the long form draws them.

/** One family run of the short form. */
export interface ShortFormRun {
  family: string;
  seed: number;
  seconds: number;
  exclude: string[];
}

/** Faults excluded from the short form until their fix lands (issue 24). */
export const NOT_YET_FIXED: string[] = ["second-pod"];

export const SHORT_FORM: readonly ShortFormRun[] = [
  { family: "segment", seed: 1, seconds: 45, exclude: NOT_YET_FIXED },
  { family: "snowflake-zk-recycle", seed: 2, seconds: 35, exclude: NOT_YET_FIXED },
  { family: "redis-sequence", seed: 3, seconds: 30, exclude: NOT_YET_FIXED },
];
