// The short form `pnpm test` runs: a few families with fixed seeds (each schedule is printed as it
// runs), chosen so that the issue-24 and issue-32 faults are drawn: segment seed 5 sets max_id back
// with a server restarted and starts a server with defaults next to the shared MariaDB;
// snowflake-zk-recycle seed 10 steps a holder's clock forward and cuts its link while the standby
// takes its worker id over; workers seed 23 kills and pauses worker processes and primaries.

/** One family run of the short form. */
export interface ShortFormRun {
  family: string;
  seed: number;
  seconds: number;
  exclude: string[];
  /**
   * Faults the run must apply (not skip) for the short form to test what it says: the reason the
   * seed was chosen. Each was applied in every fresh-clone run logged so far (10, 26-27 Nov).
   */
  applies: string[];
}

export const SHORT_FORM: readonly ShortFormRun[] = [
  // full-disk (D's journal), give-back-queued and give-back-chain came later: left out so that
  // seed 5 still draws the faults above.
  {
    family: "segment",
    seed: 5,
    seconds: 45,
    exclude: ["full-disk", "give-back-queued", "give-back-chain"],
    applies: ["max-id-back", "defaults-start"],
  },
  {
    family: "snowflake-zk-recycle",
    seed: 10,
    seconds: 40,
    // clock-blip-kill came later: left out so that seed 10 still draws clock-forward-cut.
    exclude: ["clock-blip-kill"],
    applies: ["clock-forward-cut"],
  },
  // redis-sequence (seed 3, 30 s) left out on 28 Nov: the short form took 277 s in a pnpm test on
  // a loaded 2-core machine, past its 4 minutes; the fault suite's short form keeps redis-kill
  // (the redis sequence on a Redis restarted empty), and the long form keeps the family.
  // Two worker processes per server: seed 23 kills and pauses a worker, kills two primaries and
  // SIGTERMs two servers; the store and clock faults are left to the other families.
  {
    family: "workers",
    seed: 23,
    seconds: 35,
    exclude: [
      "clock-back",
      "clock-forward",
      "row-lock",
      "max-id-back",
      "store-kill",
      "store-pause",
      "server-pause",
      "server-kill",
      // full-disk on C's primary and clock-blip-kill came later: left out so that seed 23 still
      // draws the faults above.
      "full-disk",
      "clock-blip-kill",
    ],
    applies: ["worker-kill", "worker-pause", "primary-kill", "server-term"],
  },
  // PostgreSQL: seed 13 promotes a replica that missed A, B and C's ranges (they must refuse it,
  // the restarted ones by their marks), then kills a server, cuts links, kills the promoted one.
  // row-lock and max-id-back on PostgreSQL came later: left out so that seed 13 still draws these.
  {
    family: "segment-postgres",
    seed: 13,
    seconds: 35,
    exclude: ["row-lock", "max-id-back"],
    applies: ["postgres-promoted"],
  },
];
