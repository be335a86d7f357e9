// Forming a residue set, and re-forming it with more databases (N to N+1), without an id handed
// out twice: every database is fenced first (its residue record says so, and every store over the
// set checks that record after each range), then every tag's max id is raised in every database
// above the highest max id of any, then the new residues are written. A run cut short is finished
// by running it again with the same members.
import { configError, ErrorCodes, isLeafError, LeafError } from "@leaf/core";
import { badStoredResidue, describeRecord, newResidueId, residueProblem } from "./residue-record";
import type { ResidueRecord, SegmentStore, TagRecord } from "./segment-store";
import { COMPONENT, MAX_ID, MAX_STEP } from "./validation";

/** Options of {@link formResidueSet}. */
export interface FormResidueSetOptions {
  /** Names in messages and the report (default `${kind}#${index}`), one per member. */
  names?: readonly string[];
  /**
   * Told of each step, for a log ("fenced mysql#0", "raised tag orders to 4001 in mysql#2", ...).
   */
  onProgress?: (message: string) => void;
}

/** What {@link formResidueSet} did. */
export interface ResidueSetReport {
  /** The set's id (give it to `ResidueSegmentStore`'s `setId` to pin it). */
  setId: string;
  /** The set's epoch now: 0 when first formed, one more at each re-forming. */
  epoch: number;
  /** The databases, in order: the i-th hands out ids `id % members.length === i`. */
  members: { name: string; memberId: string; remainder: number; joined: boolean }[];
  /**
   * Per tag, the id every database's ranges start at or above from now on: one more than the
   * highest max id any database had (empty when nothing was changed).
   */
  startsAt: Map<string, bigint>;
  /** True when the set was already formed as asked: nothing was written. */
  unchanged: boolean;
}

/** Rounds of raising every tag before the databases are expected to agree. */
const RAISE_ROUNDS = 10;

/**
 * Forms a residue set over `members` (stores that keep a residue record), in this order: the i-th
 * hands out the ids `id % members.length === i` from then on. Used once to form a set, and again
 * with every database of the set plus new ones to add databases (N to N+1): ids handed out before
 * and after never meet, whatever the databases held.
 *
 * 1. Every member's record is read (all must answer). Databases already in the set must all be
 *    listed: their set id is one, no database is listed twice, and the remainders of the set's
 *    epoch are all there; otherwise INVALID_CONFIG and nothing is written. Members without a record
 *    are new: they get a `joining` record (a database listed twice is caught here).
 * 2. **Fence**: every database of the set gets its record `fenced`. Stores over the set read the
 *    record after every range and use none taken after the fence; they serve the ranges they hold
 *    and take no new one until step 4 (a few round trips per database and tag).
 * 3. **Raise**: per tag, R = 1 + the highest max id of any member; the tag is created where it is
 *    missing (at R, or at the max id it was deleted with when higher), and every member's max id
 *    is raised to at least R by taking a range that is never used (a gap). Read back until every
 *    member holds every tag at or above R: every id handed out under the old residues is below R,
 *    every range taken from now on starts at or above it.
 * 4. **Activate**: each member gets its new record, `active`, at the next epoch.
 *
 * Removing a database is not supported (the set's databases must all be listed). Admin changes
 * (create, delete) should wait until it is done: a tag deleted in some members only is created
 * again in the others.
 */
export async function formResidueSet(
  stores: readonly SegmentStore[],
  options: FormResidueSetOptions = {},
): Promise<ResidueSetReport> {
  if (!Array.isArray(stores) || stores.length === 0) {
    throw configError(COMPONENT, "members", stores, "a non-empty array of segment stores");
  }
  stores.forEach((s, i) => {
    if (!s || typeof s.readResidue !== "function" || typeof s.writeResidue !== "function") {
      throw configError(
        COMPONENT,
        `members[${i}]`,
        s?.kind ?? s,
        "a segment store that keeps a residue record (readResidue, writeResidue)",
      );
    }
  });
  const names = options.names ?? stores.map((s, i) => `${s.kind}#${i}`);
  if (names.length !== stores.length || new Set(names).size !== names.length) {
    throw configError(COMPONENT, "names", names, `${stores.length} distinct names, one per member`);
  }
  const say = options.onProgress ?? (() => {});
  const n = stores.length;
  const members = stores.map((store, i) => ({ store, name: names[i]!, index: i }));

  // 1. Read and judge every record.
  const records = await Promise.all(
    members.map(async (m) => {
      const record = await m.store.readResidue!();
      if (record !== undefined) {
        const problem = residueProblem(record);
        if (problem !== undefined) throw badStoredResidue(record, problem, m.name);
      }
      return record;
    }),
  );
  const plan = planOf(members, records, n);
  if (plan.unchanged) {
    return report(plan.setId, plan.epoch, members, records as ResidueRecord[], new Map(), true);
  }
  const { setId, epoch } = plan;
  const current: (ResidueRecord | undefined)[] = [...records];

  // 1b. New members join first: a database listed twice is caught before anything is fenced.
  for (const m of members) {
    if (current[m.index] !== undefined) continue;
    const joining: ResidueRecord = {
      setId,
      memberId: newResidueId(),
      epoch,
      delta: n,
      remainder: m.index,
      state: "joining",
      version: 1,
    };
    if (!(await m.store.writeResidue!(joining, null))) {
      const found = await m.store.readResidue!();
      const twin = members.find(
        (o) => o.index < m.index && current[o.index]?.memberId === found?.memberId,
      );
      throw new LeafError({
        component: COMPONENT,
        code: twin === undefined ? ErrorCodes.UNAVAILABLE : ErrorCodes.INVALID_CONFIG,
        message:
          twin === undefined
            ? `the residue record of ${m.name} was written by someone else while the set was being formed (${describeRecord(found)}): is another formResidueSet running? Run it again once that one is done`
            : `${m.name} is the same database as ${twin.name}: list each database once (nothing was fenced; run formResidueSet again with the list fixed)`,
        details: { reason: twin === undefined ? "residue-race" : "listed-twice", member: m.name },
      });
    }
    current[m.index] = joining;
    say(`${m.name} joins as remainder ${m.index} of ${n} (epoch ${epoch})`);
  }

  // 2. Fence every database of the set.
  for (const m of members) {
    const record = current[m.index]!;
    if (record.state !== "active") continue;
    const fenced: ResidueRecord = { ...record, state: "fenced", version: record.version + 1 };
    await write(m, fenced, record.version);
    current[m.index] = fenced;
    say(`fenced ${m.name} (${describeRecord(record)})`);
  }

  // 3. Raise every tag in every member to at least R.
  const startsAt = await raiseAll(members, say);

  // 4. Activate the new residues.
  for (const m of members) {
    const record = current[m.index]!;
    const next: ResidueRecord = {
      setId,
      memberId: record.memberId,
      epoch,
      delta: n,
      remainder: m.index,
      state: "active",
      version: record.version + 1,
    };
    if (sameLayout(record, next, epoch) && record.state === "active") continue;
    await write(m, next, record.version);
    current[m.index] = next;
    say(`activated ${m.name}: ${describeRecord(next)}`);
  }
  return report(setId, epoch, members, current as ResidueRecord[], startsAt, false);
}

interface Listed {
  store: SegmentStore;
  name: string;
  index: number;
}

/** What the records read say to do: the set id and the epoch to reach, or nothing. */
function planOf(
  members: Listed[],
  records: (ResidueRecord | undefined)[],
  n: number,
): { setId: string; epoch: number; unchanged: boolean } {
  const present = members.filter((m) => records[m.index] !== undefined);
  if (present.length === 0) return { setId: newResidueId(), epoch: 0, unchanged: false };
  const rec = (m: Listed) => records[m.index]!;
  const setIds = new Set(present.map((m) => rec(m).setId));
  if (setIds.size > 1) {
    throw invalid(
      "other-set",
      `the members belong to different residue sets (${present.map((m) => `${m.name}: set ${rec(m).setId}`).join(", ")}): list the databases of one set, plus new ones`,
    );
  }
  const setId = rec(present[0]!).setId;
  const byMemberId = new Map<string, Listed>();
  for (const m of present) {
    const twin = byMemberId.get(rec(m).memberId);
    if (twin !== undefined) {
      throw invalid(
        "listed-twice",
        `${m.name} is the same database as ${twin.name}: list each database once`,
      );
    }
    byMemberId.set(rec(m).memberId, m);
  }
  const top = Math.max(...present.map((m) => rec(m).epoch));
  const atTop = present.filter((m) => rec(m).epoch === top);
  const below = present.filter((m) => rec(m).epoch < top);
  const target = (m: Listed) => sameLayout(rec(m), { delta: n, remainder: m.index }, top);
  const resuming = atTop.some((m) => rec(m).state === "joining") || below.length > 0;
  if (resuming) {
    // A run cut short: members at `top` are joining or already active in the new layout; the
    // others are the set's databases at the epoch before, fenced.
    for (const m of atTop) {
      if (!target(m)) {
        throw invalid(
          "other-layout",
          `${m.name} holds ${describeRecord(rec(m))}, not remainder ${m.index} of ${n}: a re-forming with another list of members was cut short; run formResidueSet again with the same members, in the same order`,
        );
      }
    }
    for (const m of below) {
      if (
        rec(m).epoch !== top - 1 ||
        (rec(m).state === "active" && atTop.some((o) => rec(o).state === "active"))
      ) {
        throw invalid(
          "stale-epoch",
          `${m.name} is at epoch ${rec(m).epoch} (${rec(m).state}) while others are at epoch ${top}: it was left out of a re-forming of the set; run formResidueSet with every database of the set`,
        );
      }
    }
    if (!atTop.some((m) => rec(m).state === "active")) checkComplete(below, rec);
    return { setId, epoch: top, unchanged: false };
  }
  // Every record at one epoch, none joining: the set as it stands.
  if (
    present.length === members.length &&
    atTop.every((m) => target(m) && rec(m).state === "active")
  ) {
    return { setId, epoch: top, unchanged: true };
  }
  checkComplete(atTop, rec);
  return { setId, epoch: top + 1, unchanged: false };
}

/**
 * Throws INVALID_CONFIG unless the records of `old` (the set's databases at one epoch) agree on the
 * set's size and hold each of its remainders once: every database of the set is listed.
 */
function checkComplete(old: Listed[], rec: (m: Listed) => ResidueRecord): void {
  if (old.length === 0) return;
  const delta = rec(old[0]!).delta;
  const remainders = new Set<number>();
  for (const m of old) {
    if (rec(m).delta !== delta) {
      throw invalid(
        "delta-mismatch",
        `${m.name} says the set has ${rec(m).delta} databases, ${old[0]!.name} says ${delta} (epoch ${rec(m).epoch})`,
      );
    }
    if (remainders.has(rec(m).remainder)) {
      throw invalid(
        "remainder-taken",
        `two members hold remainder ${rec(m).remainder} of ${delta}`,
      );
    }
    remainders.add(rec(m).remainder);
  }
  if (remainders.size !== delta) {
    const missing = Array.from({ length: delta }, (_, i) => i).filter((i) => !remainders.has(i));
    throw invalid(
      "incomplete-set",
      `the set has ${delta} databases but only ${remainders.size} of them are listed (remainder${missing.length > 1 ? "s" : ""} ${missing.join(", ")} missing): list every database of the set, then the new ones; a database cannot be removed`,
    );
  }
}

/**
 * Per tag, R = 1 + the highest max id any member holds; creates the tag where it is missing and
 * raises every member's max id to at least R; repeats until every member reads at or above R.
 */
async function raiseAll(
  members: Listed[],
  say: (message: string) => void,
): Promise<Map<string, bigint>> {
  const startsAt = new Map<string, bigint>();
  const template = new Map<string, TagRecord>();
  for (let round = 0; round < RAISE_ROUNDS; round++) {
    const described = await Promise.all(members.map((m) => m.store.describeTags()));
    // R is fixed by the first read after the fence: every range used under the old residues was
    // taken before it, so ends at or below it. Later reads only check that every member reached R
    // (ranges taken after the fence, never used, may have moved some further).
    const first = new Map<string, bigint>();
    for (const records of described) {
      for (const r of records) {
        if (startsAt.has(r.tag)) continue;
        const r1 = r.maxId + 1n;
        if ((first.get(r.tag) ?? 0n) < r1) first.set(r.tag, r1);
        if (!template.has(r.tag)) template.set(r.tag, r);
      }
    }
    for (const [tag, at] of first) startsAt.set(tag, at);
    let behind = false;
    for (const m of members) {
      const held = new Map(described[m.index]!.map((r) => [r.tag, r.maxId]));
      for (const [tag, target] of startsAt) {
        if (target > MAX_ID) {
          throw new LeafError({
            component: COMPONENT,
            code: ErrorCodes.TAG_EXHAUSTED,
            message: `tag ${JSON.stringify(tag)} has no id left above the highest max id of the members: it cannot be part of a re-formed set`,
            details: { tag, reason: "exhausted" },
          });
        }
        const maxId = held.get(tag);
        if (maxId === undefined) {
          behind = true;
          const raised = await createAt(m, tag, target, template.get(tag)!);
          if (raised > target) startsAt.set(tag, raised);
          say(`created tag ${tag} in ${m.name} at ${raised}`);
        } else if (maxId < target) {
          behind = true;
          await raise(m, tag, target - maxId);
          say(`raised tag ${tag} in ${m.name} from ${maxId} to at least ${target}`);
        }
      }
    }
    if (!behind) return startsAt;
  }
  throw new LeafError({
    component: COMPONENT,
    code: ErrorCodes.UNAVAILABLE,
    message: `the members' max ids did not settle at or above the raised values after ${RAISE_ROUNDS} rounds (is something still taking ranges or giving ids back?); the set stays fenced: run formResidueSet again`,
    details: { reason: "raise-unsettled" },
  });
}

/** Creates `tag` in `m` at `at` (or at the max id it was deleted with there, when higher). */
async function createAt(m: Listed, tag: string, at: bigint, like: TagRecord): Promise<bigint> {
  const create = (startId: bigint) =>
    m.store.createTag({ tag, step: like.step, startId, description: like.description });
  try {
    await create(at);
    return at;
  } catch (error) {
    if (isLeafError(error, ErrorCodes.ALREADY_EXISTS) && error.details.reason === "deleted") {
      const min = BigInt(String(error.details.minStartId));
      await create(min);
      return min;
    }
    if (isLeafError(error, ErrorCodes.ALREADY_EXISTS)) return at; // created meanwhile: raised next round
    throw error;
  }
}

/** Moves the max id of `tag` in `m` up by `gap`, in ranges never used (a gap). */
async function raise(m: Listed, tag: string, gap: bigint): Promise<void> {
  let left = gap;
  while (left > 0n) {
    const step = left > BigInt(MAX_STEP) ? MAX_STEP : Number(left);
    await m.store.takeRange(tag, step);
    left -= BigInt(step);
  }
}

/** Writes `next` in `m` when its version is `expected`, or throws. */
async function write(m: Listed, next: ResidueRecord, expected: number): Promise<void> {
  if (await m.store.writeResidue!(next, expected)) return;
  const found = await m.store.readResidue!();
  throw new LeafError({
    component: COMPONENT,
    code: ErrorCodes.UNAVAILABLE,
    message: `the residue record of ${m.name} changed while the set was being formed (now ${describeRecord(found)}): is another formResidueSet running? Run it again once that one is done`,
    details: { reason: "residue-race", member: m.name },
  });
}

function sameLayout(
  record: ResidueRecord,
  layout: { delta: number; remainder: number },
  epoch: number,
): boolean {
  return (
    record.epoch === epoch && record.delta === layout.delta && record.remainder === layout.remainder
  );
}

function invalid(reason: string, message: string): LeafError {
  return new LeafError({
    component: COMPONENT,
    code: ErrorCodes.INVALID_CONFIG,
    message: `cannot form the residue set: ${message}; nothing was changed`,
    details: { reason },
  });
}

function report(
  setId: string,
  epoch: number,
  members: Listed[],
  records: ResidueRecord[],
  startsAt: Map<string, bigint>,
  unchanged: boolean,
): ResidueSetReport {
  return {
    setId,
    epoch,
    members: members.map((m) => ({
      name: m.name,
      memberId: records[m.index]!.memberId,
      remainder: m.index,
      joined: records[m.index]!.epoch === epoch && !unchanged,
    })),
    startsAt,
    unchanged,
  };
}
