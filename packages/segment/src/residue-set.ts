// Forming a residue set, and re-forming it with more databases (N to N+1), without an id handed
// out twice: every database is fenced first (its residue record says so, and every store over the
// set checks that record after each range), then every tag's max id is raised in every database
// above the highest max id of any, then the new residues are written. A run cut short is finished
// by running it again with the same members.
import { configError, ErrorCodes, isLeafError, LeafError } from "@leaf/core";
import {
  badStoredResidue,
  describeRecord,
  newResidueId,
  residueProblem,
  sameMembers,
} from "./residue-record";
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
 *    epoch are all there; once a database is active at an epoch, a list other than the one its
 *    record names is refused until every member of that epoch is active (then it forms the next
 *    one, which must add a database: the same databases in another order are refused); otherwise
 *    INVALID_CONFIG and nothing is written. Members without a record, or with a `joining` record of
 *    a run that did not finish, are new: they get a `joining` record naming this run's list (a
 *    database listed twice is caught here).
 * 2. **Fence**: every database of the set gets its record `fenced` (written again when it already
 *    is: with step 1's, every record is written once by this run before any is activated, so of two
 *    runs at once only one activates anything). Stores over the set read the record after every
 *    range and use none taken after the fence; they serve the ranges they hold and take no new one
 *    until step 4 (a few round trips per database and tag).
 * 3. **Raise**: per tag, R = 1 + the highest max id of any member; the tag is created where it is
 *    missing (at R, or at the max id it was deleted with when higher), and every member's max id
 *    is raised to at least R by taking a range that is never used (a gap). Read back until every
 *    member holds every tag at or above R: every id handed out under the old residues is below R,
 *    every range taken from now on starts at or above it.
 * 4. **Activate**: each member gets its new record, `active`, at the next epoch, naming the
 *    epoch's members: the set's databases first, then the new ones.
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
  const { setId, epoch, list } = plan;
  const current: (ResidueRecord | undefined)[] = [...records];
  const done = (r: ResidueRecord | undefined) =>
    r !== undefined && r.epoch === epoch && r.state === "active" && sameMembers(r.members, list);

  // 2. Claim every member for this run: each record is written once more (compare-and-set on its
  // version) before any is activated, so of two runs only one can activate anything: whichever
  // claims a member second makes the other's activation of it fail. New members first: a database
  // listed twice is caught before anything is fenced.
  for (const m of members) {
    const record = current[m.index];
    if (record !== undefined && record.state !== "joining") continue;
    const joining: ResidueRecord = {
      setId,
      memberId: list[m.index]!,
      epoch,
      delta: n,
      remainder: m.index,
      state: "joining",
      version: (record?.version ?? 0) + 1,
      members: list,
    };
    if (!(await m.store.writeResidue!(joining, record?.version ?? null))) {
      const found = await m.store.readResidue!();
      const twin = members.find(
        (o) => o.index < m.index && current[o.index]?.memberId === found?.memberId,
      );
      if (twin === undefined) throw raced(m, found);
      throw new LeafError({
        component: COMPONENT,
        code: ErrorCodes.INVALID_CONFIG,
        message: `${m.name} is the same database as ${twin.name}: list each database once (nothing was fenced; run formResidueSet again with the list fixed)`,
        details: { reason: "listed-twice", member: m.name },
      });
    }
    current[m.index] = joining;
    say(`${m.name} joins as remainder ${m.index} of ${n} (epoch ${epoch})`);
  }
  // Then the set's databases: fenced (fenced again when they already are, as a claim).
  for (const m of members) {
    const record = current[m.index]!;
    if (record.state === "joining" || done(record)) continue;
    const fenced: ResidueRecord = { ...record, state: "fenced", version: record.version + 1 };
    await write(m, fenced, record.version);
    current[m.index] = fenced;
    say(`fenced ${m.name} (${describeRecord(record)})`);
  }

  // 3. Raise every tag in every member to at least R.
  const startsAt = await raiseAll(members, say);

  // 4. Activate the new residues: the set's databases first, then the new ones, so that a new
  // database is active only once every database of the set is active in the new layout.
  const order = [
    ...members.filter((m) => current[m.index]!.state !== "joining"),
    ...members.filter((m) => current[m.index]!.state === "joining"),
  ];
  for (const m of order) {
    const record = current[m.index]!;
    if (done(record)) continue;
    const next: ResidueRecord = {
      setId,
      memberId: list[m.index]!,
      epoch,
      delta: n,
      remainder: m.index,
      state: "active",
      version: record.version + 1,
      members: list,
    };
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

/** What the records read say to do. */
interface Plan {
  setId: string;
  /** The epoch to form (or the one the set is at, when unchanged). */
  epoch: number;
  /** The member ids of that epoch, in member order: the records' `members`. */
  list: string[];
  unchanged: boolean;
}

/**
 * What the records read say to do: the set id, the epoch to reach and its list of members, or
 * nothing. The members of an epoch are one list: once a database is active at an epoch, its record
 * names the epoch's members, and a run with another list is refused until every member of that
 * epoch is activated in it (then it forms the next one, with at least one database more). Records
 * of an epoch that no database was activated in (`joining` only) are claims of a run that did not
 * finish: they are claimed again by this run.
 */
function planOf(members: Listed[], records: (ResidueRecord | undefined)[], n: number): Plan {
  const present = members.filter((m) => records[m.index] !== undefined);
  // The ids this run would form the set with: each database's own, a new one for a new database.
  const list = members.map((m) => records[m.index]?.memberId ?? newResidueId());
  if (present.length === 0) return { setId: newResidueId(), epoch: 0, list, unchanged: false };
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
  // Databases activated in an epoch (active, or fenced by a later run) are its members; a joining
  // record is only a claim.
  const settled = present.filter((m) => rec(m).state !== "joining");
  for (const m of settled) {
    if (rec(m).epoch < top - 1) throw staleEpoch(m, rec(m), top);
  }
  const atTop = settled.filter((m) => rec(m).epoch === top);
  const below = settled.filter((m) => rec(m).epoch === top - 1);
  if (settled.length === 0 && top > 0) {
    throw invalid(
      "incomplete-set",
      `the listed databases hold only joining records (epoch ${top} of set ${setId}) of a run that did not finish: list the databases of the set too`,
    );
  }
  // A claim of a first forming (epoch 0) names the database that run activates first: unless it is
  // listed (and so seen not active), that run may have activated databases not listed here.
  for (const m of present) {
    const r = rec(m);
    if (r.state !== "joining" || r.epoch !== 0) continue;
    if (sameMembers(r.members, list) || byMemberId.has(r.members[0]!)) continue;
    throw invalid(
      "incomplete-set",
      `${m.name} holds a joining record of a forming of set ${setId} whose first database (member ${r.members[0]!.slice(0, 8)}) is not listed: list the databases that run formed the set with`,
    );
  }

  if (atTop.length === 0) {
    // No database was activated at `top` yet: its joining records are claims (this run's, cut
    // short, or another list's); the set is the databases at the epoch before. Form `top`.
    checkComplete(below, rec);
    return { setId, epoch: top, list, unchanged: false };
  }

  const epochList = oneList(atTop, rec, top);
  if (sameMembers(list, epochList)) {
    // The epoch's own list: the set as it stands, or a run that activated some of it, to finish.
    if (
      present.length === n &&
      atTop.length === n &&
      atTop.every((m) => rec(m).state === "active")
    ) {
      return { setId, epoch: top, list, unchanged: true };
    }
    for (const m of below) {
      if (rec(m).state === "active") throw staleEpoch(m, rec(m), top);
    }
    return { setId, epoch: top, list, unchanged: false };
  }
  // Another list: allowed only once every member of the epoch is listed and was activated in it,
  // and with new databases (then it forms the next epoch).
  const named = epochList.map(
    (id) => byMemberId.get(id)?.name ?? `a database not listed (member ${id.slice(0, 8)})`,
  );
  const formedBy = `epoch ${top} of the set is formed by ${named.join(", ")} (remainders 0 to ${epochList.length - 1})`;
  const missing = epochList.filter((id) => byMemberId.get(id) === undefined);
  if (missing.length > 0) {
    throw invalid(
      "incomplete-set",
      `${formedBy}: list every one of them, in any order, then the new databases; a database cannot be removed${claimsOf(present, rec, epochList, top)}`,
    );
  }
  // Activated in the epoch: at it, and not only claimed (a joining record at the epoch is a member
  // the epoch's run never activated).
  const unfinished = epochList.filter((id) => {
    const r = rec(byMemberId.get(id)!);
    return r.epoch !== top || r.state === "joining";
  });
  if (unfinished.length > 0) {
    throw invalid(
      "other-list",
      `${formedBy}, and a run forming it was cut short (${unfinished.map((id) => byMemberId.get(id)!.name).join(", ")} not activated yet): run formResidueSet with exactly those members, in that order, to finish it; then add databases${claimsOf(present, rec, epochList, top)}`,
    );
  }
  if (n === epochList.length) {
    // The epoch's databases in another order, none new: a re-forming at the same size. Refused: a
    // database restored from a backup is told by its record's delta being below the databases
    // listed, which holds only if every re-forming adds a database.
    throw invalid(
      "same-size",
      `${formedBy}, and the list given (${members.map((m) => m.name).join(", ")}) names the same databases in another order: a re-forming only adds databases. List them in the epoch's order to use the set as it stands (nothing to do), or add new databases after them`,
    );
  }
  return { setId, epoch: top + 1, list, unchanged: false };
}

/**
 * The members of epoch `epoch` named by the records of `atTop` (databases activated in it): one
 * list; records naming different ones are refused.
 */
function oneList(
  atTop: Listed[],
  rec: (m: Listed) => ResidueRecord,
  epoch: number,
): readonly string[] {
  const first = atTop[0]!;
  for (const m of atTop) {
    if (!sameMembers(rec(m).members, rec(first).members)) {
      throw invalid(
        "other-list",
        `${first.name} and ${m.name} are both at epoch ${epoch} but name different members of it (${describeRecord(rec(first))}; ${describeRecord(rec(m))}): records changed by hand or by two runs; no database should serve until this is sorted out`,
      );
    }
  }
  return rec(first).members;
}

/** For a refusal: the listed databases holding claims (joining records) of no epoch's list. */
function claimsOf(
  present: Listed[],
  rec: (m: Listed) => ResidueRecord,
  epochList: readonly string[],
  top: number,
): string {
  const stale = present.filter(
    (m) =>
      rec(m).state === "joining" &&
      !(rec(m).epoch === top && sameMembers(rec(m).members, epochList)),
  );
  if (stale.length === 0) return "";
  const names = stale.map((m) => m.name).join(", ");
  return ` (${names} ${stale.length > 1 ? "hold joining records" : "holds a joining record"} of a run that did not finish: not in the set; a run that lists ${stale.length > 1 ? "them" : "it"} with every member of the set adds ${stale.length > 1 ? "them" : "it"})`;
}

function staleEpoch(m: Listed, record: ResidueRecord, top: number): LeafError {
  return invalid(
    "stale-epoch",
    `${m.name} is at epoch ${record.epoch} (${record.state}) while others are at epoch ${top}: it was left out of a re-forming of the set, or restored from a backup; run formResidueSet with every database of the set`,
  );
}

/**
 * Throws INVALID_CONFIG unless the records of `old` (the set's databases at one epoch) agree on the
 * set's size and hold each of its remainders once: every database of the set is listed.
 */
function checkComplete(old: Listed[], rec: (m: Listed) => ResidueRecord): void {
  if (old.length === 0) return;
  const delta = rec(old[0]!).delta;
  oneList(old, rec, rec(old[0]!).epoch);
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
    // Created meanwhile: raised next round.
    if (isLeafError(error, ErrorCodes.ALREADY_EXISTS)) return at;
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
  throw raced(m, await m.store.readResidue!());
}

/** The error when another run wrote the record of `m` (now `found`) after this run read it. */
function raced(m: Listed, found: ResidueRecord | undefined): LeafError {
  return new LeafError({
    component: COMPONENT,
    code: ErrorCodes.UNAVAILABLE,
    message: `the residue record of ${m.name} changed while the set was being formed (now ${describeRecord(found)}): is another formResidueSet running? This run activates nothing more. Once the other is done, run formResidueSet again: it finishes the set as it stands, or tells which members to list`,
    details: { reason: "residue-race", member: m.name },
  });
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
