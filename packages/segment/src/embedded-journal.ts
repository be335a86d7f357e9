// The embedded store's journal format: JSON lines (a header, then put/max/step/delete records),
// parsed into the tag table and the deleted tags' last max ids; shared by the store's open (which
// drops a torn last line) and its verification after a failed write (which accepts nothing but
// complete lines).
import { ErrorCodes, LeafError } from "@leaf/core";
import { COMPONENT, MAX_ID } from "./validation";

/** Name of the journal file in the data folder. */
export const JOURNAL_FILE = "leaf-segments.jsonl";

const FORMAT = "leaf-segment-journal";
const VERSION = 1;

/** One tag as the journal holds it. */
export interface Row {
  maxId: bigint;
  step: number;
  description: string | null;
  updatedAt: number;
}

/** One line of the journal after the header. */
export type JournalRecord =
  | {
      op: "put";
      tag: string;
      maxId: string;
      step: number;
      description: string | null;
      at: number;
      /** On a give-back: the max id this record replaced (readers before it ignore the field). */
      back?: string;
    }
  | { op: "max"; tag: string; maxId: string; at: number }
  | { op: "step"; tag: string; step: number; at: number }
  | {
      op: "delete";
      tag: string;
      at: number;
      /**
       * The tag's max id when deleted (or, in a compacted journal, the highest it was deleted
       * with). Replaying the records before it gives the same; compaction keeps it here.
       */
      maxId?: string;
    };

/** What a journal's text holds. */
export interface ParsedJournal {
  rows: Map<string, Row>;
  /** Deleted tags (not created again since) with the highest max id each was deleted with. */
  deleted: Map<string, bigint>;
  /** Records after the header. */
  records: number;
  /** Whether the text starts with a valid header (false for an empty text). */
  header: boolean;
  /** Bytes of the complete, valid lines; less than the text when its end is torn. */
  validBytes: number;
  /** Bytes of the whole text. */
  totalBytes: number;
}

/**
 * Parses a journal's text. Invalid lines at the very end (a write cut short by a crash or a full
 * disk: never fsynced, so never acknowledged) are left out of `validBytes`; an invalid line
 * anywhere else is CORRUPT_DATA naming the file and the line.
 */
export function parseJournal(path: string, text: string): ParsedJournal {
  const rows = new Map<string, Row>();
  const deleted = new Map<string, bigint>();
  const totalBytes = Buffer.byteLength(text, "utf8");
  const corrupt = (line: number, what: string) =>
    new LeafError({
      component: COMPONENT,
      code: ErrorCodes.CORRUPT_DATA,
      message: `the journal ${path} is damaged at line ${line}: ${what}. Restore it from a backup; do not delete it, or ids will repeat`,
      details: { path, line },
    });
  const lines = text.split("\n");
  // lines[i] for i <= lastComplete ended with a newline; the last element did not (often "").
  const lastComplete = lines.length - 2;
  const parsed = lines.map((line, i) => (i <= lastComplete ? parseLine(line) : undefined));
  let validEnd = -1;
  for (let i = 0; i <= lastComplete; i++) if (parsed[i] !== undefined) validEnd = i;
  if (validEnd === -1 && text.length > 0) throw corrupt(1, "no valid line at all");
  let records = 0;
  let header = false;
  for (let i = 0; i <= validEnd; i++) {
    const record = parsed[i];
    if (record === undefined) throw corrupt(i + 1, "not a JSON line");
    if (i === 0) {
      const head = record as { format?: unknown; version?: unknown };
      if (head.format !== FORMAT) throw corrupt(1, `not a ${FORMAT} file`);
      if (head.version !== VERSION) {
        throw corrupt(
          1,
          `version ${String(head.version)} is not supported (this version reads ${VERSION})`,
        );
      }
      header = true;
      continue;
    }
    const problem = applyRecord(rows, deleted, record as JournalRecord);
    if (problem) throw corrupt(i + 1, problem);
    records++;
  }
  const validBytes = lines
    .slice(0, validEnd + 1)
    .reduce((n, line) => n + Buffer.byteLength(line, "utf8") + 1, 0);
  return { rows, deleted, records, header, validBytes, totalBytes };
}

/** The journal's header line. */
export function headerLine(): string {
  return `${JSON.stringify({ format: FORMAT, version: VERSION, writtenAt: Date.now() })}\n`;
}

/**
 * A whole journal holding one `put` per tag and one `delete` per deleted tag (with the max id it
 * was deleted with), as compaction writes it.
 */
export function snapshotText(rows: Map<string, Row>, deleted: Map<string, bigint>): string {
  let text = headerLine();
  for (const [tag, maxId] of deleted) {
    const record: JournalRecord = { op: "delete", tag, at: 0, maxId: maxId.toString() };
    text += `${JSON.stringify(record)}\n`;
  }
  for (const [tag, row] of rows) text += `${JSON.stringify(putRecord(tag, row))}\n`;
  return text;
}

/** The record that creates (or restates) a tag. */
export function putRecord(tag: string, row: Row): JournalRecord {
  return {
    op: "put",
    tag,
    maxId: row.maxId.toString(),
    step: row.step,
    description: row.description,
    at: row.updatedAt,
  };
}

/**
 * What differs between two tag tables (max id, step or presence), in words, or undefined when
 * they agree; `updatedAt` is not compared.
 */
export function rowsDiffer(
  expected: Map<string, Row>,
  found: Map<string, Row>,
): string | undefined {
  for (const [tag, row] of expected) {
    const other = found.get(tag);
    if (!other) return `tag ${JSON.stringify(tag)} is missing`;
    if (other.maxId !== row.maxId) {
      return `tag ${JSON.stringify(tag)} has max id ${other.maxId}, this store handed out up to ${row.maxId}`;
    }
    if (other.step !== row.step)
      return `tag ${JSON.stringify(tag)} has step ${other.step}, not ${row.step}`;
  }
  for (const tag of found.keys()) {
    if (!expected.has(tag)) return `tag ${JSON.stringify(tag)} is there but was deleted`;
  }
  return undefined;
}

function parseLine(line: string): unknown {
  try {
    const value: unknown = JSON.parse(line);
    return value !== null && typeof value === "object" ? value : undefined;
  } catch {
    return undefined;
  }
}

/** Applies one journal record; returns what is wrong with it, or undefined. */
function applyRecord(
  rows: Map<string, Row>,
  deleted: Map<string, bigint>,
  record: JournalRecord,
): string | undefined {
  if (!record || typeof record !== "object" || typeof record.tag !== "string") return "no tag";
  const at = typeof record.at === "number" ? record.at : 0;
  switch (record.op) {
    case "put": {
      const maxId = parseMax(record.maxId);
      if (maxId === undefined) return `bad maxId ${JSON.stringify(record.maxId)}`;
      if (!Number.isInteger(record.step) || record.step < 1) return `bad step ${record.step}`;
      if (record.back !== undefined) {
        const back = parseMax(record.back);
        if (back === undefined) return `bad back ${JSON.stringify(record.back)}`;
        // A give-back holds only where its writer found the tag: at max id `back`. The writer
        // checked that in its write queue, so in a journal written by one holder it always holds
        // here. A holder paused between its check and its write (past a lock takeover) can append
        // it after another holder's ranges: lowering the max id then would hand those out again,
        // so it is skipped (its ids are a gap).
        if (rows.get(record.tag)?.maxId !== back) return undefined;
      }
      rows.set(record.tag, {
        maxId,
        step: record.step,
        description: typeof record.description === "string" ? record.description : null,
        updatedAt: at,
      });
      return undefined;
    }
    case "max": {
      const row = rows.get(record.tag);
      const maxId = parseMax(record.maxId);
      if (!row) return `max id for tag ${JSON.stringify(record.tag)} that does not exist`;
      if (maxId === undefined) return `bad maxId ${JSON.stringify(record.maxId)}`;
      if (maxId > row.maxId) row.maxId = maxId;
      row.updatedAt = at;
      return undefined;
    }
    case "step": {
      const row = rows.get(record.tag);
      if (!row) return `step for tag ${JSON.stringify(record.tag)} that does not exist`;
      if (!Number.isInteger(record.step) || record.step < 1) return `bad step ${record.step}`;
      row.step = record.step;
      row.updatedAt = at;
      return undefined;
    }
    case "delete": {
      let maxId = rows.get(record.tag)?.maxId ?? 0n;
      if (record.maxId !== undefined) {
        const stated = parseMax(record.maxId);
        if (stated === undefined) return `bad maxId ${JSON.stringify(record.maxId)}`;
        if (stated > maxId) maxId = stated;
      }
      const before = deleted.get(record.tag);
      if (before === undefined || maxId > before) deleted.set(record.tag, maxId);
      rows.delete(record.tag);
      return undefined;
    }
    default:
      return `unknown op ${JSON.stringify((record as { op?: unknown }).op)}`;
  }
}

function parseMax(value: unknown): bigint | undefined {
  if (typeof value !== "string" || !/^\d{1,19}$/.test(value)) return undefined;
  const parsed = BigInt(value);
  return parsed <= MAX_ID ? parsed : undefined;
}
