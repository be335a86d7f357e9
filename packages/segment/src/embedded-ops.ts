// What each call of the embedded store does to its rows: a function of the rows and the time that
// changes them and returns the journal record to append, an undo (run when the append fails, so
// nothing unwritten is ever acknowledged) and the answer. The store (embedded-store.ts) queues them
// and makes them durable; these know nothing of files.
import { type JournalRecord, putRecord, type Row } from "./embedded-journal";
import type { NewTag, SegmentRange, TagRecord } from "./segment-store";
import {
  belowDeletedTag,
  MAX_ID,
  maxIdMovedBack,
  normalizeNewTag,
  type RangeFloors,
  rangeOverflow,
  tagExists,
  unknownTag,
} from "./validation";

/** One change of the rows: the record to append, how to undo it, and the call's answer. */
export interface Applied<T> {
  record?: JournalRecord;
  undo?: () => void;
  value: T;
}

/** An operation, applied in the write queue's order to the rows at time `now`. */
export type RowOp<T> = (rows: Map<string, Row>, now: number) => Applied<T>;

/** A tag's record as the store answers it. */
export function toRecord(tag: string, row: Row): TagRecord {
  return {
    tag,
    maxId: row.maxId,
    step: row.step,
    description: row.description,
    updatedAt: row.updatedAt,
  };
}

/** Every tag with its record, ordered by tag. */
export const describeOp: RowOp<TagRecord[]> = (rows) => ({
  value: [...rows.keys()].sort().map((tag) => toRecord(tag, rows.get(tag)!)),
});

/**
 * The next range of `tag`: `[maxId, maxId + step)`; the floors learn its end. Refused, nothing
 * changed, when the max id is below the caller's `given` floor (its high-water mark: a folder put
 * back from an older copy).
 */
export function takeRangeOp(
  tag: string,
  step: number | undefined,
  where: string,
  floors: RangeFloors,
  given?: bigint,
): RowOp<SegmentRange> {
  return (rows, now) => {
    const row = rows.get(tag);
    if (!row) throw unknownTag(tag, where);
    // Only the caller's floor: this store is its rows' one writer, and its own floors run ahead of
    // a range whose write failed (undone below), which is no move back.
    if (given !== undefined && row.maxId < given) {
      throw maxIdMovedBack(tag, row.maxId, given, where, { mark: true });
    }
    const used = step ?? row.step;
    const start = row.maxId;
    const end = start + BigInt(used);
    if (end > MAX_ID) throw rangeOverflow(tag, start, used);
    const before = row.updatedAt;
    row.maxId = end;
    row.updatedAt = now;
    const range: SegmentRange = { tag, start, end, step: used, tableStep: row.step };
    floors.raise(tag, end, "embedded", start);
    return {
      record: { op: "max", tag, maxId: end.toString(), at: now },
      undo: () => {
        row.maxId = start;
        row.updatedAt = before;
      },
      value: range,
    };
  };
}

/**
 * `[from, end)` back, when the tag's max id is still `end` and no range was taken since: a `put`
 * record restating the tag with max id `from` (and `"back"`, the max id it replaced).
 */
export function giveBackOp(
  tag: string,
  from: bigint,
  end: bigint,
  floors: RangeFloors,
): RowOp<boolean> {
  return (rows, now) => {
    // Checked again in the write queue: a range taken since the call began moved the max id on.
    const row = rows.get(tag);
    if (!row || row.maxId !== end || floors.get(tag) !== end) return { value: false };
    const before = row.updatedAt;
    row.maxId = from;
    row.updatedAt = now;
    const restoreFloor = floors.lower(tag, from);
    return {
      record: { ...putRecord(tag, row), back: end.toString() },
      undo: () => {
        row.maxId = end;
        row.updatedAt = before;
        restoreFloor();
      },
      value: true,
    };
  };
}

/**
 * A new tag; refused with ALREADY_EXISTS when it exists, or when it was deleted with a max id
 * above its start id (`deleted`: the store's deleted tags).
 */
export function createTagOp(
  input: NewTag,
  where: string,
  deleted: Map<string, bigint>,
): RowOp<TagRecord> {
  const tag = normalizeNewTag(input);
  return (rows, now) => {
    if (rows.has(tag.tag)) throw tagExists(tag.tag, where);
    const floor = deleted.get(tag.tag);
    if (floor !== undefined && floor > tag.startId) {
      throw belowDeletedTag(tag.tag, tag.startId, floor, where);
    }
    const row: Row = {
      maxId: tag.startId,
      step: tag.step,
      description: tag.description,
      updatedAt: now,
    };
    rows.set(tag.tag, row);
    return {
      record: putRecord(tag.tag, row),
      undo: () => rows.delete(tag.tag),
      value: toRecord(tag.tag, row),
    };
  };
}

/** A tag's stored step changed. */
export function updateStepOp(tag: string, step: number, where: string): RowOp<TagRecord> {
  return (rows, now) => {
    const row = rows.get(tag);
    if (!row) throw unknownTag(tag, where);
    const before = { step: row.step, updatedAt: row.updatedAt };
    row.step = step;
    row.updatedAt = now;
    return {
      record: { op: "step", tag, step, at: now },
      undo: () => Object.assign(row, before),
      value: toRecord(tag, row),
    };
  };
}

/**
 * A tag deleted: answers its record as it was, undefined when there was none, with the max id a
 * re-create may start at (the row's, or the higher one the tag was deleted with before); `deleted`
 * (the store's deleted tags) keeps it.
 */
export function deleteTagOp(
  tag: string,
  deleted: Map<string, bigint>,
): RowOp<TagRecord | undefined> {
  return (rows, now) => {
    const row = rows.get(tag);
    if (!row) return { value: undefined };
    const before = deleted.get(tag);
    rows.delete(tag);
    // A give-back onto a re-created row can leave it below the max id the tag was deleted with
    // before: the answer (and the record) is the higher, where a re-create may start.
    const maxId = before === undefined || row.maxId > before ? row.maxId : before;
    deleted.set(tag, maxId);
    return {
      record: { op: "delete", tag, at: now, maxId: maxId.toString() },
      undo: () => {
        rows.set(tag, row);
        if (before === undefined) deleted.delete(tag);
        else deleted.set(tag, before);
      },
      value: { ...toRecord(tag, row), maxId },
    };
  };
}
