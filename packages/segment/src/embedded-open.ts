// Opening the embedded store's data folder: the options and their checks, the lock file taken
// before anything is read, and the journal read back (a torn last line cut off) before appending.
import { mkdirSync, readFileSync, truncateSync } from "node:fs";
import { type FileHandle, open } from "node:fs/promises";
import { join, resolve } from "node:path";
import { configError, ErrorCodes, LeafError } from "@leaf/core";
import {
  acquireLockFile,
  type HeldLockFile,
  readLockFile,
  writeFileAtomic,
} from "@leaf/core/adapter";
import { JOURNAL_FILE, parseJournal, type Row, snapshotText } from "./embedded-journal";
import { COMPONENT } from "./validation";

/** Name of the lock file in the data folder. */
export const LOCK_FILE = "leaf-segments.lock";

/** Options of `new EmbeddedSegmentStore(options)`. */
export interface EmbeddedSegmentStoreOptions {
  /** The data folder; created when missing. One process at a time may use it. */
  dir: string;
  /**
   * Rewrite the journal as one line per tag once this many records were appended since the last
   * rewrite (default 10,000).
   */
  compactAfterRecords?: number;
  /**
   * A lock whose owner cannot be judged by its pid (another host, boot or PID namespace, such as
   * another container on a shared volume) is taken over once its file was not touched for this
   * many ms (default 30,000); the holder touches it every third of this. A holder paused that long
   * finds its lock gone before its next write and stops (LOCKED): it never hands out a range after
   * losing the lock.
   */
  lockStaleAfterMs?: number;
  /**
   * Called once each time the store starts refusing calls: a write failed (a full disk) or the
   * journal could not be reopened (UNAVAILABLE, until a later call finds the journal writable and
   * verified), or the folder was lost to another process (LOCKED, for good). For an error-level log
   * line and a metric; `stats()` tells the current state.
   */
  onFailure?: (error: LeafError) => void;
  /**
   * How the journal is opened for appending (default `fs.promises.open(path, "a")`). A seam for
   * fault tests, which make it fail (EMFILE) to check that the store hands out nothing until it has
   * reopened and verified the journal.
   */
  openFile?: (path: string) => Promise<FileHandle>;
}

/** The identity of a file, to tell whether the journal's path still names the file we append to. */
export interface FileId {
  dev: number;
  ino: number;
}

/** What {@link openFolder} hands the store: the folder locked, the journal read and open. */
export interface OpenedFolder {
  file: FileHandle;
  fileId: FileId;
  /** Bytes of the journal as opened. */
  size: number;
  lock: HeldLockFile;
  state: { rows: Map<string, Row>; deleted: Map<string, bigint>; records: number };
}

/** The options after their checks, with defaults filled in. */
export interface EmbeddedSettings {
  dir: string;
  compactAfter: number;
  staleAfter: number;
  openFile: (path: string) => Promise<FileHandle>;
  onFailure: ((error: LeafError) => void) | undefined;
}

/** Checks `options` (no I/O), throwing INVALID_CONFIG that names the option and the value. */
export function checkEmbeddedOptions(options: EmbeddedSegmentStoreOptions): EmbeddedSettings {
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
  for (const key of ["onFailure", "openFile"] as const) {
    if (options[key] !== undefined && typeof options[key] !== "function") {
      throw configError(COMPONENT, key, options[key], "a function");
    }
  }
  return {
    dir: resolve(options.dir),
    compactAfter,
    staleAfter,
    openFile: options.openFile ?? ((path: string) => open(path, "a")),
    onFailure: options.onFailure,
  };
}

/**
 * Creates and locks the folder, reads the journal (rewriting it as a snapshot when it is new or
 * mostly superseded records) and opens it for appending.
 */
export async function openFolder(settings: EmbeddedSettings): Promise<OpenedFolder> {
  const { dir, compactAfter, staleAfter, openFile } = settings;
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
      writeFileAtomic(path, snapshotText(state.rows, state.deleted));
      state.records = state.rows.size + state.deleted.size;
    }
    const file = await openFile(path);
    const stat = await file.stat();
    return { file, fileId: idOf(stat), size: stat.size, lock, state };
  } catch (error) {
    lock.release();
    throw folderError(dir, error);
  }
}

/** The identity (device and inode) of a file. */
export function idOf(stat: { dev: number; ino: number }): FileId {
  return { dev: stat.dev, ino: stat.ino };
}

/** The lock file's content, or undefined when it cannot be read. */
export function safeReadLock(path: string): ReturnType<typeof readLockFile> {
  try {
    return readLockFile(path);
  } catch {
    return undefined;
  }
}

/** File-system failures while opening become a LeafError naming the folder; LeafErrors pass. */
function folderError(dir: string, error: unknown): unknown {
  if (error instanceof LeafError) return error;
  const e = error as NodeJS.ErrnoException;
  // A full disk is an outage to clear, not a wrong setting.
  if (e.code === "ENOSPC" || e.code === "EDQUOT" || e.code === "EFBIG") {
    return new LeafError({
      component: COMPONENT,
      code: ErrorCodes.UNAVAILABLE,
      message: `cannot write to the data folder ${dir}: ${e.code === "EFBIG" ? "the file size limit was reached" : "the disk is full"} (${e.code}: ${e.message}); free space, then start again`,
      details: { dir, errno: e.code },
      cause: error,
    });
  }
  return new LeafError({
    component: COMPONENT,
    code: ErrorCodes.INVALID_CONFIG,
    message: `cannot use ${dir} as the data folder (${e.code ?? "error"}: ${e.message}); give a writable folder`,
    details: { key: "dir", value: dir },
    cause: error,
  });
}

/**
 * Reads the journal at open. Invalid lines at the very end (a write cut short by a crash or a full
 * disk: never fsynced, so never acknowledged) are dropped and cut off the file; an invalid line
 * anywhere else is CORRUPT_DATA.
 */
function readJournal(path: string): {
  rows: Map<string, Row>;
  deleted: Map<string, bigint>;
  records: number;
  exists: boolean;
} {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") {
      return { rows: new Map(), deleted: new Map(), records: 0, exists: false };
    }
    throw error;
  }
  const parsed = parseJournal(path, text);
  if (parsed.validBytes < parsed.totalBytes) truncateSync(path, parsed.validBytes);
  return {
    rows: parsed.rows,
    deleted: parsed.deleted,
    records: parsed.records,
    exists: parsed.header,
  };
}
