// The residue record a database of a residue set keeps about itself: its checks, shared by the
// stores that keep one (memory, MySQL, ...) and by the residue set's store and its forming.
import { randomBytes } from "node:crypto";
import { argumentError, configError, ErrorCodes, LeafError } from "@leaf/core";
import type { TableNaming } from "./host-options";
import type { ResidueRecord } from "./segment-store";
import { COMPONENT, MAX_STEP } from "./validation";

/** Longest set or member id, in characters (a `varchar(64)` column). */
export const MAX_RESIDUE_ID_LENGTH = 64;

const STATES: ReadonlySet<string> = new Set(["active", "fenced", "joining"]);

/** What is wrong with `record` as a residue record, or undefined when it is one. */
export function residueProblem(record: unknown): string | undefined {
  if (record === null || typeof record !== "object") return "not an object";
  const r = record as Partial<Record<keyof ResidueRecord, unknown>>;
  for (const key of ["setId", "memberId"] as const) {
    const value = r[key];
    if (typeof value !== "string" || value.length === 0 || value.length > MAX_RESIDUE_ID_LENGTH) {
      return `its ${key} ${String(value)} is not a string of 1 to ${MAX_RESIDUE_ID_LENGTH} characters`;
    }
  }
  if (!isInt(r.epoch, 0, MAX_STEP)) return `its epoch ${String(r.epoch)} is not 0 .. ${MAX_STEP}`;
  if (!isInt(r.delta, 1, MAX_STEP)) return `its delta ${String(r.delta)} is not 1 .. ${MAX_STEP}`;
  if (!isInt(r.remainder, 0, (r.delta as number) - 1)) {
    return `its remainder ${String(r.remainder)} is not 0 .. ${(r.delta as number) - 1}`;
  }
  if (typeof r.state !== "string" || !STATES.has(r.state)) {
    return `its state ${String(r.state)} is not "active", "fenced" or "joining"`;
  }
  if (!isInt(r.version, 1, Number.MAX_SAFE_INTEGER)) {
    return `its version ${String(r.version)} is not a positive integer`;
  }
  if (r.members === undefined || r.members === null) {
    return "it has no members (the member ids of its epoch): not a record written by this version of the store";
  }
  return membersProblem(r as ResidueRecord, r.members);
}

/**
 * What is wrong with `members` as the list of the record's epoch: it must hold `delta` distinct
 * member ids, this database's own at its remainder (a remainder or a member id changed by hand
 * on one side breaks that binding).
 */
function membersProblem(record: ResidueRecord, members: unknown): string | undefined {
  if (
    !Array.isArray(members) ||
    members.some(
      (id) => typeof id !== "string" || id.length === 0 || id.length > MAX_RESIDUE_ID_LENGTH,
    )
  ) {
    return `its members ${describeValue(members)} are not a list of member ids`;
  }
  if (members.length !== record.delta) {
    return `its members list ${members.length} databases, its delta says ${record.delta}`;
  }
  if (new Set(members).size !== members.length) {
    return `its members ${describeValue(members)} name a database twice`;
  }
  if (members[record.remainder] !== record.memberId) {
    const at = members.indexOf(record.memberId);
    return `its remainder ${record.remainder} is not its place in its epoch's members (${at === -1 ? "its member id is not among them" : `its member id is at ${at}`}): a remainder or member id changed by hand`;
  }
  return undefined;
}

function describeValue(value: unknown): string {
  const text = JSON.stringify(value) ?? String(value);
  return text.length > 200 ? `${text.slice(0, 200)}...` : text;
}

/** Throws INVALID_ARGUMENT unless `record` is a residue record (a store's `writeResidue`). */
export function checkResidueRecord(
  record: unknown,
  name = "record",
): asserts record is ResidueRecord {
  const problem = residueProblem(record);
  if (problem !== undefined)
    throw argumentError(COMPONENT, name, record, `a residue record (${problem})`);
}

/** Throws INVALID_ARGUMENT unless `version` is null or a positive integer (`writeResidue`). */
export function checkExpectedVersion(version: unknown): asserts version is number | null {
  if (version !== null && !isInt(version, 1, Number.MAX_SAFE_INTEGER)) {
    throw argumentError(COMPONENT, "expectedVersion", version, "null or a positive integer");
  }
}

/** The CORRUPT_DATA error for a stored residue record that is not one (a damaged row). */
export function badStoredResidue(record: unknown, problem: string, where: string): LeafError {
  return new LeafError({
    component: COMPONENT,
    code: ErrorCodes.CORRUPT_DATA,
    message: `the residue record in ${where} is damaged: ${problem}; no range is taken from this database until it is fixed (form the set again with formResidueSet)`,
    details: { reason: "bad-residue", problem, record: describeRecord(record) },
  });
}

/** True when `a` and `b` are the same record, version included. */
export function sameRecord(a: ResidueRecord | undefined, b: ResidueRecord | undefined): boolean {
  return (
    a !== undefined &&
    b !== undefined &&
    a.setId === b.setId &&
    a.memberId === b.memberId &&
    a.epoch === b.epoch &&
    a.delta === b.delta &&
    a.remainder === b.remainder &&
    a.state === b.state &&
    a.version === b.version &&
    sameMembers(a.members, b.members)
  );
}

/** True when `a` and `b` are the same list of members. */
export function sameMembers(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && a.every((id, i) => id === b[i]);
}

/** A new random set or member id: 32 hex digits. */
export function newResidueId(): string {
  return randomBytes(16).toString("hex");
}

/**
 * `record` in words, for messages: "remainder 1 of 2 (epoch 0, set 5f3a..., version 3, active)".
 */
export function describeRecord(record: unknown): string {
  if (residueProblem(record) !== undefined) return JSON.stringify(record) ?? String(record);
  const r = record as ResidueRecord;
  return `remainder ${r.remainder} of ${r.delta} (epoch ${r.epoch}, set ${r.setId.slice(0, 8)}, member ${r.memberId.slice(0, 8)}, version ${r.version}, ${r.state}, members ${r.members.map((id) => id.slice(0, 8)).join(",")})`;
}

function isInt(value: unknown, min: number, max: number): value is number {
  return typeof value === "number" && Number.isInteger(value) && value >= min && value <= max;
}

/** A residue record's row as the SQL stores select it (the version as a number or decimal text). */
export interface ResidueRow {
  set_id: string;
  member_id: string;
  epoch: number | string;
  delta: number | string;
  remainder: number | string;
  state: string;
  version: number | string;
  /**
   * The epoch's member ids as JSON text. Null or absent only in a row this version of the store
   * did not write (a table or row made by hand): its record is refused.
   */
  members?: string | null;
}

/**
 * The record of a selected row, as it is (a row without members, or with members that are not
 * JSON, included): the residue set's store judges it, and refuses what is not a record.
 */
export function residueRecordOf(row: ResidueRow): ResidueRecord {
  let members: unknown;
  if (row.members !== undefined && row.members !== null) {
    try {
      members = JSON.parse(String(row.members));
    } catch {
      members = String(row.members);
    }
  }
  return {
    setId: String(row.set_id),
    memberId: String(row.member_id),
    epoch: Number(row.epoch),
    delta: Number(row.delta),
    remainder: Number(row.remainder),
    state: String(row.state) as ResidueRecord["state"],
    version: Number(row.version),
    ...(members === undefined ? {} : { members }),
  } as ResidueRecord;
}

/** The `members` column's value of `record`: its epoch's member ids as JSON text. */
export function residueMembersText(record: ResidueRecord): string {
  return JSON.stringify(record.members);
}

/**
 * The name of the table where a SQL store keeps its residue record: the tag table's name with
 * `_residue` appended (`leaf_alloc_residue`), beside it, one row. Apart from the tag table, so
 * readers of every row of it (Java Leaf) never see the record.
 */
export function residueTableName(table: string, naming: TableNaming): string {
  const name = `${table}_residue`;
  if (name.split(".").at(-1)!.length > naming.maxLength) {
    throw configError(
      COMPONENT,
      "table",
      table,
      `a table name of at most ${naming.maxLength - 8} characters: a residue set's database keeps its residue in a table named after it with _residue appended`,
    );
  }
  return name;
}
