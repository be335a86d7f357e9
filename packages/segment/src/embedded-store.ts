// The embedded segment store: tags and max ids in an append-only JSON-lines journal in a local
// folder, fsynced before a range is returned and compacted by atomic rename, behind a lock file so
// that one process at a time uses the folder. Zero setup, single node; see the README for the format.
import { mkdirSync, readFileSync, truncateSync } from "node:fs";
import { type FileHandle, open } from "node:fs/promises";
import { join, resolve } from "node:path";
import {
  acquireLockFile,
  configError,
  ErrorCodes,
  type HeldLockFile,
  LeafError,
  writeFileAtomic,
} from "@leaf/core";
import type { NewTag, SegmentRange, SegmentStore, TagRecord } from "./segment-store";
import {
  COMPONENT,
  checkStep,
  checkTag,
  closedError,
  MAX_ID,
  normalizeNewTag,
  rangeOverflow,
  tagExists,
  unknownTag,
} from "./validation";

/** Name of the journal file in the data folder. */
export const JOURNAL_FILE = "leaf-segments.jsonl";
/** Name of the lock file in the data folder. */
export const LOCK_FILE = "leaf-segments.lock";

const FORMAT = "leaf-segment-journal";
const VERSION = 1;

/** Options of {@link EmbeddedSegmentStore.open}. */
export interface EmbeddedSegmentStoreOptions {
  /** The data folder; created when missing. One process at a time may use it. */
  dir: string;
  /**
   * Rewrite the journal as one line per tag once this many records were appended since the last
   * rewrite (default 10,000).
   */
  compactAfterRecords?: number;
  /** A lock left by a process on another host counts as stale after this many ms (default 30,000). */
  lockStaleAfterMs?: number;
}

interface Row {
  maxId: bigint;
  step: number;
  description: string | null;
  updatedAt: number;
}

type JournalRecord =
  | { op: "put"; tag: string; maxId: string; step: number; description: string | null; at: number }
  | { op: "max"; tag: string; maxId: string; at: number }
  | { op: "step"; tag: string; step: number; at: number }
  | { op: "delete"; tag: string; at: number };

/** One queued operation: `apply` changes the state and returns the record to append and an undo. */
interface Pending {
  apply(
    rows: Map<string, Row>,
    now: number,
  ): { record?: JournalRecord; undo?: () => void; value: unknown };
  resolve(value: unknown): void;
  reject(error: unknown): void;
}

/**
 * A {@link SegmentStore} in a local folder, for a single node with nothing else to run.
 *
 * Every change is appended to the journal and fsynced before the call resolves, so after a crash
 * (SIGKILL, power loss) no range that was returned is returned again. Concurrent calls share one
 * write and one fsync (group commit). A second process opening the folder gets LOCKED.
 */
export class EmbeddedSegmentStore implements SegmentStore {
  readonly kind = "embedded";
  /** The journal file. */
  readonly journalPath: string;
  private readonly rows: Map<string, Row>;
  private readonly compactAfter: number;
  private queue: Pending[] = [];
  private writing: Promise<void> | undefined;
  private closed = false;
  private broken: LeafError | undefined;
  private appendedSinceCompaction: number;

  private constructor(
    private readonly dir: string,
    private file: FileHandle,
    private size: number,
    private readonly lock: HeldLockFile,
    state: { rows: Map<string, Row>; records: number },
    compactAfter: number,
  ) {
    this.journalPath = join(dir, JOURNAL_FILE);
    this.rows = state.rows;
    this.appendedSinceCompaction = state.records;
    this.compactAfter = compactAfter;
  }

  /**
   * Opens (or creates) the store in `options.dir`. Rejects with LOCKED when another process uses the
   * folder, CORRUPT_DATA when the journal is damaged anywhere but in its last, unfinished line (which
   * a crash mid-write leaves and which is dropped: it was never acknowledged).
   */
  static async open(options: EmbeddedSegmentStoreOptions): Promise<EmbeddedSegmentStore> {
    if (!options || typeof options.dir !== "string" || options.dir.length === 0) {
      throw configError(COMPONENT, "dir", options?.dir, "the path of a data folder");
    }
    const compactAfter = options.compactAfterRecords ?? 10_000;
    if (!Number.isInteger(compactAfter) || compactAfter < 1) {
      throw configError(COMPONENT, "compactAfterRecords", compactAfter, "an integer of at least 1");
    }
    const staleAfter = options.lockStaleAfterMs ?? 30_000;
    if (!Number.isSafeInteger(staleAfter) || staleAfter < 1) {
      throw configError(COMPONENT, "lockStaleAfterMs", staleAfter, "a positive integer of ms");
    }
    const dir = resolve(options.dir);
    let lock: HeldLockFile;
    try {
      mkdirSync(dir, { recursive: true });
      lock = acquireLockFile(join(dir, LOCK_FILE), {
        component: COMPONENT,
        resource: "the data folder",
        advice:
          "only one process may use an embedded segment store: stop the other one, give this one " +
          "another folder, or use the MySQL store to share ranges between processes",
        foreignStaleAfterMs: staleAfter,
      });
    } catch (error) {
      throw folderError(dir, error);
    }
    try {
      const path = join(dir, JOURNAL_FILE);
      const state = readJournal(path);
      if (state.records > state.rows.size + compactAfter / 2 || !state.exists) {
        writeFileAtomic(path, snapshotText(state.rows));
        state.records = state.rows.size;
      }
      const file = await open(path, "a");
      const size = (await file.stat()).size;
      return new EmbeddedSegmentStore(dir, file, size, lock, state, compactAfter);
    } catch (error) {
      lock.release();
      throw folderError(dir, error);
    }
  }

  async listTags(): Promise<string[]> {
    return this.enqueue(() => ({ value: [...this.rows.keys()] }));
  }

  async describeTags(): Promise<TagRecord[]> {
    return this.enqueue((rows) => ({
      value: [...rows.keys()].sort().map((tag) => toRecord(tag, rows.get(tag)!)),
    }));
  }

  async takeRange(tag: string, step?: number): Promise<SegmentRange> {
    checkTag(tag);
    if (step !== undefined) checkStep(step);
    return this.enqueue((rows, now) => {
      const row = rows.get(tag);
      if (!row) throw unknownTag(tag, `the embedded store ${this.dir}`);
      const used = step ?? row.step;
      const start = row.maxId;
      const end = start + BigInt(used);
      if (end > MAX_ID) throw rangeOverflow(tag, start, used);
      const before = row.updatedAt;
      row.maxId = end;
      row.updatedAt = now;
      const range: SegmentRange = { tag, start, end, step: used, tableStep: row.step };
      return {
        record: { op: "max", tag, maxId: end.toString(), at: now },
        undo: () => {
          row.maxId = start;
          row.updatedAt = before;
        },
        value: range,
      };
    });
  }

  async createTag(input: NewTag): Promise<TagRecord> {
    const tag = normalizeNewTag(input);
    return this.enqueue((rows, now) => {
      if (rows.has(tag.tag)) throw tagExists(tag.tag, `the embedded store ${this.dir}`);
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
    });
  }

  async updateStep(tag: string, step: number): Promise<TagRecord> {
    checkTag(tag);
    checkStep(step);
    return this.enqueue((rows, now) => {
      const row = rows.get(tag);
      if (!row) throw unknownTag(tag, `the embedded store ${this.dir}`);
      const before = { step: row.step, updatedAt: row.updatedAt };
      row.step = step;
      row.updatedAt = now;
      return {
        record: { op: "step", tag, step, at: now },
        undo: () => Object.assign(row, before),
        value: toRecord(tag, row),
      };
    });
  }

  async deleteTag(tag: string): Promise<boolean> {
    checkTag(tag);
    return this.enqueue((rows, now) => {
      const row = rows.get(tag);
      if (!row) return { value: false };
      rows.delete(tag);
      return {
        record: { op: "delete", tag, at: now },
        undo: () => rows.set(tag, row),
        value: true,
      };
    });
  }

  /** Waits for pending writes, closes the journal and releases the lock. Idempotent. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    while (this.writing) await this.writing;
    try {
      await this.file.close();
    } finally {
      this.lock.release();
    }
  }

  private enqueue<T>(
    apply: (
      rows: Map<string, Row>,
      now: number,
    ) => {
      record?: JournalRecord;
      undo?: () => void;
      value: T;
    },
  ): Promise<T> {
    if (this.closed) return Promise.reject(closedError(`the embedded segment store ${this.dir}`));
    if (this.broken) return Promise.reject(this.broken);
    return new Promise<T>((resolve, reject) => {
      this.queue.push({ apply, resolve: resolve as (value: unknown) => void, reject });
      this.kick();
    });
  }

  /** Starts the writer unless it runs; restarts it when work arrived as it was finishing. */
  private kick(): void {
    if (this.writing) return;
    this.writing = this.drain().finally(() => {
      this.writing = undefined;
      if (this.queue.length > 0) this.kick();
    });
  }

  /** Applies queued operations in order, one append and one fsync per batch (group commit). */
  private async drain(): Promise<void> {
    while (this.queue.length > 0) {
      const batch = this.queue;
      this.queue = [];
      const now = Date.now();
      const undos: (() => void)[] = [];
      const done: { pending: Pending; value: unknown }[] = [];
      let text = "";
      let records = 0;
      for (const pending of batch) {
        if (this.broken) {
          pending.reject(this.broken);
          continue;
        }
        try {
          const result = pending.apply(this.rows, now);
          if (result.record) {
            text += `${JSON.stringify(result.record)}\n`;
            records++;
          }
          if (result.undo) undos.push(result.undo);
          done.push({ pending, value: result.value });
        } catch (error) {
          pending.reject(error);
        }
      }
      if (text.length > 0) {
        try {
          const bytes = Buffer.from(text, "utf8");
          await this.file.write(bytes);
          await this.file.datasync();
          this.size += bytes.length;
          this.appendedSinceCompaction += records;
        } catch (cause) {
          for (const undo of undos.reverse()) undo();
          this.recoverFromFailedWrite(cause);
          const error = new LeafError({
            component: COMPONENT,
            code: ErrorCodes.UNAVAILABLE,
            message: `could not write the journal ${this.journalPath}: ${(cause as Error).message}; nothing was changed. Check the disk (space, permissions)`,
            cause,
          });
          for (const { pending } of done) pending.reject(error);
          continue;
        }
      }
      for (const { pending, value } of done) pending.resolve(value);
      if (this.appendedSinceCompaction >= this.rows.size + this.compactAfter) await this.compact();
    }
  }

  /** Cuts a partly written batch off the journal; if that fails too, refuses further writes. */
  private recoverFromFailedWrite(cause: unknown): void {
    try {
      truncateSync(this.journalPath, this.size);
    } catch {
      this.broken = new LeafError({
        component: COMPONENT,
        code: ErrorCodes.UNAVAILABLE,
        message: `the journal ${this.journalPath} could not be written or repaired (${(cause as Error).message}); close the store and open it again once the disk is fixed`,
        cause,
      });
    }
  }

  /** Rewrites the journal as one line per tag, atomically (temp file, fsync, rename). */
  private async compact(): Promise<void> {
    try {
      writeFileAtomic(this.journalPath, snapshotText(this.rows));
      const old = this.file;
      this.file = await open(this.journalPath, "a");
      this.size = (await this.file.stat()).size;
      this.appendedSinceCompaction = this.rows.size;
      await old.close();
    } catch {
      // The old journal is still complete and appended to; compaction is retried after more records.
      this.appendedSinceCompaction = this.rows.size;
    }
  }
}

/** File-system failures while opening become a LeafError naming the folder; LeafErrors pass. */
function folderError(dir: string, error: unknown): unknown {
  if (error instanceof LeafError) return error;
  const e = error as NodeJS.ErrnoException;
  return new LeafError({
    component: COMPONENT,
    code: ErrorCodes.INVALID_CONFIG,
    message: `cannot use ${dir} as the data folder (${e.code ?? "error"}: ${e.message}); give a writable folder`,
    details: { key: "dir", value: dir },
    cause: error,
  });
}

function putRecord(tag: string, row: Row): JournalRecord {
  return {
    op: "put",
    tag,
    maxId: row.maxId.toString(),
    step: row.step,
    description: row.description,
    at: row.updatedAt,
  };
}

function snapshotText(rows: Map<string, Row>): string {
  let text = `${JSON.stringify({ format: FORMAT, version: VERSION, writtenAt: Date.now() })}\n`;
  for (const [tag, row] of rows) text += `${JSON.stringify(putRecord(tag, row))}\n`;
  return text;
}

function toRecord(tag: string, row: Row): TagRecord {
  return {
    tag,
    maxId: row.maxId,
    step: row.step,
    description: row.description,
    updatedAt: row.updatedAt,
  };
}

/**
 * Reads the journal. Invalid lines at the very end (a write cut short by a crash: never fsynced, so
 * never acknowledged) are dropped and cut off the file; an invalid line anywhere else is CORRUPT_DATA.
 */
function readJournal(path: string): { rows: Map<string, Row>; records: number; exists: boolean } {
  const rows = new Map<string, Row>();
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT")
      return { rows, records: 0, exists: false };
    throw error;
  }
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
    const problem = applyRecord(rows, record as JournalRecord);
    if (problem) throw corrupt(i + 1, problem);
    records++;
  }
  const keep = lines
    .slice(0, validEnd + 1)
    .reduce((n, line) => n + Buffer.byteLength(line, "utf8") + 1, 0);
  if (keep < Buffer.byteLength(text, "utf8")) truncateSync(path, keep);
  return { rows, records, exists: header };
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
function applyRecord(rows: Map<string, Row>, record: JournalRecord): string | undefined {
  if (!record || typeof record !== "object" || typeof record.tag !== "string") return "no tag";
  const at = typeof record.at === "number" ? record.at : 0;
  switch (record.op) {
    case "put": {
      const maxId = parseMax(record.maxId);
      if (maxId === undefined) return `bad maxId ${JSON.stringify(record.maxId)}`;
      if (!Number.isInteger(record.step) || record.step < 1) return `bad step ${record.step}`;
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
    case "delete":
      rows.delete(record.tag);
      return undefined;
    default:
      return `unknown op ${JSON.stringify((record as { op?: unknown }).op)}`;
  }
}

function parseMax(value: unknown): bigint | undefined {
  if (typeof value !== "string" || !/^\d{1,19}$/.test(value)) return undefined;
  const parsed = BigInt(value);
  return parsed <= MAX_ID ? parsed : undefined;
}
