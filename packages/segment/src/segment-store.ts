// The segment-store contract: where segment mode takes its id ranges from. Implemented by the MySQL
// store (Java Leaf's leaf_alloc table), the embedded store and the in-memory store; checked by
// segmentStoreConformance, which third-party stores run unchanged.

/**
 * A range of ids taken from a store: `[start, end)`, that is `start` up to `end - 1`.
 * Java Leaf calls `end` the segment's `max` and `start` its initial `value` (`max_id - step`).
 */
export interface SegmentRange {
  /** The tag the range belongs to. */
  readonly tag: string;
  /** First id of the range (the tag's stored max id before this range was taken). */
  readonly start: bigint;
  /** One past the last id of the range: the tag's stored max id once this range was taken. */
  readonly end: bigint;
  /** Ids in the range (`end - start`): the step this range was taken with. */
  readonly step: number;
  /** The step stored for the tag when the range was taken (Java Leaf's `step` column). */
  readonly tableStep: number;
  /**
   * Set by a store over a residue set (several databases, each handing out one residue class):
   * only the ids of `[start, end)` with `id % stride === remainder` belong to the range, so the
   * generator hands out the first such id, then every `stride`-th. Absent (or 1): every id of
   * `[start, end)`, as every single-database store answers. An integer from 1 to 2,147,483,647.
   */
  readonly stride?: number;
  /** With `stride`: the residue class of the range's ids, an integer from 0 to `stride - 1`. */
  readonly remainder?: number;
}

/** The residue class of ranges given back (see {@link SegmentStore.giveBack}). */
export interface RangeResidue {
  readonly stride: number;
  readonly remainder: number;
}

/**
 * What one database of a residue set stores about itself (a row, written when the set is formed
 * by `formResidueSet`), read by `ResidueSegmentStore` at start and after every range: the
 * database hands out only ids `id % delta === remainder` (tinyid's `delta` and `remainder`).
 */
export interface ResidueRecord {
  /**
   * Random id of the set, the same in every database of it: a database of another set is refused.
   */
  readonly setId: string;
  /**
   * Random id of this database, kept across epochs: the same database listed twice is refused.
   */
  readonly memberId: string;
  /** The set's generation: 0 when formed, one more at each re-forming (a database added). */
  readonly epoch: number;
  /** Databases in the set at this epoch (the ranges' stride): 1 .. 2,147,483,647. */
  readonly delta: number;
  /** This database's residue class: 0 .. delta - 1. */
  readonly remainder: number;
  /**
   * `active`: ranges may be taken. `fenced`: the set is being re-formed; no range is used until
   * the record is active again (at a higher epoch). `joining`: a database being added to the set
   * (or the set being formed), not used until it is active.
   */
  readonly state: "active" | "fenced" | "joining";
  /**
   * Grows by one at every write of the record, never reused: a range is used only when the
   * version read after it equals the one verified before it, so no write of the record (a fence)
   * came in between.
   */
  readonly version: number;
  /**
   * The member ids of the set at this epoch, in remainder order (`members[remainder]` is this
   * database's `memberId`, `members.length` is `delta`): which databases form the epoch, written
   * by `formResidueSet` in every record of it, so that a run or a store reaching only some of them
   * can tell the epoch's one list of members. A stored record without it is refused (CORRUPT_DATA
   * `bad-residue`): it was not written by this version of the store.
   */
  readonly members: readonly string[];
}

/** One stored tag, as the admin API and Java Leaf's `/db` page show it. */
export interface TagRecord {
  readonly tag: string;
  /**
   * The tag's stored max id (`max_id`): the first id of the next range taken, and one past the last
   * id of every range handed out so far.
   */
  readonly maxId: bigint;
  /** The stored step (`step`): ids per range when no step is asked for. */
  readonly step: number;
  /** Free text (`description`), or null. */
  readonly description: string | null;
  /** When the row last changed, in ms since the Unix epoch (`update_time`); null when unknown. */
  readonly updatedAt: number | null;
}

/** What {@link SegmentStore.createTag} is asked for. */
export interface NewTag {
  /** 1 to 128 characters, no control characters. */
  tag: string;
  /** Ids per range when no step is asked for; an integer from 1 to 2,147,483,647 (SQL `int`). */
  step: number;
  /** First id the tag hands out: 0 .. 2^63 - 1 (default 1, as Java Leaf's `max_id` default). */
  startId?: bigint;
  /** Free text, up to 256 characters. */
  description?: string | null;
}

/**
 * A store of tags and their next free id, from which generators take ranges.
 *
 * Invariants every store guarantees:
 * - **Disjoint ranges.** Two `takeRange` calls that resolve, from any instance or process sharing
 *   the storage, never return overlapping ranges: each range starts at the stored max id and moves
 *   it forward by the step, atomically.
 * - **Durable before returned.** A range is returned only after the new max id is durable
 *   (committed, or fsynced to disk), so after a crash of the store or of the caller no range that
 *   was returned is ever returned again.
 * - **Never backwards.** A tag's max id only grows (until the tag is deleted).
 * - **Exact.** Ids are bigint end to end, exact up to 2^63 - 1; a range that would pass 2^63 - 1 is
 *   refused, never wrapped or rounded.
 *
 * Failures reject with a `LeafError` (from @leaf/core): `INVALID_ARGUMENT` for a malformed tag,
 * step, start id or description (nothing is changed); `UNKNOWN_TAG` (Leaf code -2) for a tag the
 * store does not hold; `TAG_EXHAUSTED` (Leaf code -3) when a range would pass 2^63 - 1 (nothing is
 * changed); `UNAVAILABLE` when the backing storage cannot be reached or is read-only (a range may
 * have been consumed without being returned: a gap, never a duplicate; callers retry with backoff),
 * with `details.reason` "split-brain" when more than one backing server takes writes (the range
 * taken is discarded: a gap); `CORRUPT_DATA` with `details.reason` (a {@link RangeRefusal}) when
 * the stored row is damaged (a step below 1, a negative max id) or the max id is below the end of a
 * range this instance already returned (moved back by hand, or a failover to a server that lost
 * writes): nothing is changed, and generators stop serving the tag until the row is fixed; `CLOSED`
 * after `close()`.
 *
 * Stores validate what they read: every returned range is `[start, start + step)` with `0 <= start
 * < end <= 2^63 - 1` and steps from 1 to 2,147,483,647, and no range starts below the end of a
 * range the same instance returned before the call began.
 */
export interface SegmentStore {
  /** Short name for messages and metrics: "mysql", "embedded", "memory". */
  readonly kind: string;
  /**
   * Optional start-up work (opening a folder, taking its lock), run by the first call anyway; the
   * generator calls it from its own `start()` so that a store that cannot open fails the start
   * with its own error (LOCKED, CORRUPT_DATA, ...). Idempotent.
   */
  start?(): Promise<void>;
  /** Names of every stored tag, in no particular order. An empty store answers `[]`. */
  listTags(): Promise<string[]>;
  /** Every stored tag with its max id, step, description and update time, ordered by tag. */
  describeTags(): Promise<TagRecord[]>;
  /**
   * Atomically takes the next range of `tag`: `[maxId, maxId + step)`, moving the stored max id to
   * `maxId + step`. `step` (an integer from 1 to 2,147,483,647) overrides the stored step for this
   * range only (Leaf's dynamic step); without it the stored step is used. `floor`, when given, is
   * the lowest max id the caller accepts (the end of the highest range its node took, which its
   * high-water marks remember across restarts): a store that checks its max id against the ranges
   * it handed out checks it against `floor` too and refuses a max id below it with CORRUPT_DATA,
   * without moving it. A store without such checks may ignore it: the generator then refuses the
   * range it answered, and since the max id moved for it, serves the tag again only after a
   * restart.
   */
  takeRange(tag: string, step?: number, floor?: bigint): Promise<SegmentRange>;
  /**
   * Creates a tag whose first range starts at `startId` (default 1). Rejects with
   * `ALREADY_EXISTS` (`details.reason` "exists") when the tag already exists, leaving it as it was,
   * and (`details.reason` "deleted", `details.minStartId`) when a tag of that name was deleted with
   * a max id above `startId`: its ranges handed out ids up to that max id, so the store remembers
   * it and creates the tag again only at or above it.
   */
  createTag(tag: NewTag): Promise<TagRecord>;
  /** Changes the stored step of `tag` for the ranges taken after; returns the updated record. */
  updateStep(tag: string, step: number): Promise<TagRecord>;
  /**
   * Deletes `tag` and answers its record as it was deleted, or undefined when there was no such
   * tag. The record's max id is final: read and deleted atomically, so no range was taken after it
   * (every id ever handed out from the tag is below it). When the tag was deleted before with a
   * higher max id (a give-back can lower a re-created row below it), the answer is that higher
   * one: the answered max id is always where a re-create may start. The store keeps it, and
   * {@link createTag} refuses to create the tag again below it. Generators drop the tag at their
   * next refresh; until then they serve the ranges they hold, all below the answered max id.
   */
  deleteTag(tag: string): Promise<TagRecord | undefined>;
  /**
   * Optional: gives back ids `[from, end)` that the caller took from this instance and never handed
   * out, so that the next range starts at `from` (no ids lost on a graceful restart). A
   * compare-and-set, atomic against every instance and process sharing the storage: the stored max
   * id becomes `from` only if it still equals `end`, that is, no range was taken since the one
   * ending at `end`. Resolves true when given back (durably, as `takeRange`), false when the max id
   * moved on or the tag is gone (nothing changed). `end` must not be above the end of the last
   * range this instance returned for the tag, and when it is that end, `from` must lie within the
   * ranges this instance returned back to back up to it: otherwise INVALID_ARGUMENT, nothing
   * changed (a store gives back only its own ranges). The caller hands out no id of `[from, end)`
   * afterwards, whatever the answer: a failed call (UNAVAILABLE) leaves a gap, never a duplicate.
   * For ranges answered with a `stride`, `residue` names their stride and remainder (only the ids
   * of that class in `[from, end)` are given back); other stores ignore it.
   */
  giveBack?(tag: string, from: bigint, end: bigint, residue?: RangeResidue): Promise<boolean>;
  /**
   * Optional, for a database of a residue set: this database's {@link ResidueRecord}, read from
   * the backing storage (never a cached copy), or undefined when none was ever written.
   */
  readResidue?(): Promise<ResidueRecord | undefined>;
  /**
   * Optional, with {@link readResidue}: writes `next` when the stored record's version is
   * `expectedVersion` (null: when none is stored), atomically against every process sharing the
   * storage, durably. Resolves false, changing nothing, when the stored version is another.
   */
  writeResidue?(next: ResidueRecord, expectedVersion: number | null): Promise<boolean>;
  /**
   * True when `takeRange` may answer ranges with a `stride` (a residue set): their ids increase per
   * database, not across databases. The generator's `highWater` option is refused with such a
   * store (its marks judge one id sequence per tag).
   */
  readonly stridedRanges?: boolean;
  /** Releases connections, files and locks. Idempotent; later calls reject with `CLOSED`. */
  close(): Promise<void>;
}

/**
 * Why a store or the generator refused a range: `details.reason` of its CORRUPT_DATA error.
 * - `bad-step`: the stored step is not an integer from 1 to 2,147,483,647 (a damaged row).
 * - `bad-max-id`: the stored max id is negative.
 * - `max-id-moved-back`: the max id is below the end of a range this process already took.
 * - `stale-primary`: the same, on a host other than the one that range came from (a failover to a
 *   server that lost writes).
 * - `bad-range`: a store answered a range that is not `[start, start + step)` with `end > start`.
 */
export type RangeRefusal =
  | "bad-step"
  | "bad-max-id"
  | "max-id-moved-back"
  | "stale-primary"
  | "bad-range";
