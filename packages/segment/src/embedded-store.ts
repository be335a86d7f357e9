// The embedded segment store: tags and max ids in an append-only JSON-lines journal in a local
// folder, fully written and fsynced before a range is returned and compacted by atomic rename,
// behind a lock file checked before and after every write. It fails closed: after a short or failed
// write it hands out nothing until it has verified the journal again. See the README for the
// format. Opening and locking are in embedded-open.ts, the journal format in embedded-journal.ts,
// what each call does to the rows in embedded-ops.ts; what stays is the write queue, the durable
// append and its fail-closed recovery, one class because they share the journal handle, its size
// and state.
import { fstatSync, readFileSync, statSync } from "node:fs";
import type { FileHandle } from "node:fs/promises";
import { join } from "node:path";
import { ErrorCodes, LeafError } from "@leaf/core";
import { type HeldLockFile, writeFileAtomic } from "@leaf/core/adapter";
import { describeCause, reopenError, writeError } from "./embedded-errors";
import { JOURNAL_FILE, parseJournal, type Row, rowsDiffer, snapshotText } from "./embedded-journal";
import {
  checkEmbeddedOptions,
  type EmbeddedSegmentStoreOptions,
  type EmbeddedSettings,
  type FileId,
  idOf,
  openFolder,
  safeReadLock,
} from "./embedded-open";
import {
  createTagOp,
  deleteTagOp,
  describeOp,
  giveBackOp,
  type RowOp,
  takeRangeOp,
  updateStepOp,
} from "./embedded-ops";
import type { NewTag, SegmentRange, SegmentStore, TagRecord } from "./segment-store";
import { COMPONENT, checkFloor, checkStep, checkTag, closedError, RangeFloors } from "./validation";

export { JOURNAL_FILE } from "./embedded-journal";
export { type EmbeddedSegmentStoreOptions, LOCK_FILE } from "./embedded-open";

/** Counters and state of an {@link EmbeddedSegmentStore}, for metrics and health checks. */
export interface EmbeddedStoreStats {
  /** Batches appended and fsynced (each holds one or more records). */
  appends: number;
  /** Appends or compactions that failed (short or failed write, failed sync or reopen). */
  failedWrites: number;
  /** Times the store verified the journal after a failure and served again. */
  recoveries: number;
  /**
   * Why the store refuses calls right now (the message of its error), or undefined while it
   * serves. A failed write is retried on the next call; a lost folder is final.
   */
  refusing: string | undefined;
  /** True once the folder was lost to another process: the store never serves again. */
  lost: boolean;
}

/** One queued operation and the caller waiting for its answer. */
interface Pending {
  apply: RowOp<unknown>;
  resolve(value: unknown): void;
  reject(error: unknown): void;
}

/**
 * A {@link SegmentStore} in a local folder, for a single node with nothing else to run.
 *
 * Every change is appended to the journal, all of its bytes written and fsynced, before the call
 * resolves, so after a crash (SIGKILL, power loss) no range that was returned is returned again.
 * Concurrent calls share one write and one fsync (group commit). A second process opening the
 * folder gets LOCKED. Before and after every append the store checks that the lock file is still
 * its own and that the journal is still the file it appends to, with the size it wrote: a store
 * that lost the folder rejects every call with LOCKED. A short or failed write (a full disk) is
 * never acknowledged: the store rejects every call with UNAVAILABLE until a later call finds the
 * journal writable, cut back to its last complete record and holding exactly what the store handed
 * out.
 */
export class EmbeddedSegmentStore implements SegmentStore {
  readonly kind = "embedded";
  /** The journal file. */
  readonly journalPath: string;
  private readonly dir: string;
  /** "the embedded store <dir>", for messages. */
  private readonly where: string;
  private readonly settings: EmbeddedSettings;
  private readonly compactAfter: number;
  /** The folder opened, locked and read: set by {@link start}. */
  private starting: Promise<void> | undefined;
  private rows = new Map<string, Row>();
  /** Deleted tags with the highest max id each was deleted with: a re-create starts at or above. */
  private readonly deleted = new Map<string, bigint>();
  /** The journal handle; undefined before start and after a compaction could not reopen it. */
  private file: FileHandle | undefined;
  private fileId: FileId = { dev: -1, ino: -1 };
  /** Bytes of the journal: everything written and fsynced, no more. */
  private size = 0;
  private lock: HeldLockFile | undefined;
  private queue: Pending[] = [];
  private writing: Promise<void> | undefined;
  private closed = false;
  /** Set while the journal may not be appended to; cleared by {@link recover}. */
  private failure: LeafError | undefined;
  /** Set for good once the folder was lost to another process (or another writer). */
  private lost: LeafError | undefined;
  private appendedSinceCompaction = 0;
  private counters = { appends: 0, failedWrites: 0, recoveries: 0 };
  /** Ends of the ranges this store handed out: a give-back holds only ids of its own ranges. */
  private readonly floors = new RangeFloors();

  /**
   * Checks the options (INVALID_CONFIG naming a bad one); touches nothing on disk. The folder is
   * opened by {@link start}, which the first call runs for you.
   */
  constructor(options: EmbeddedSegmentStoreOptions) {
    this.settings = checkEmbeddedOptions(options);
    this.dir = this.settings.dir;
    this.where = `the embedded store ${this.dir}`;
    this.journalPath = join(this.dir, JOURNAL_FILE);
    this.compactAfter = this.settings.compactAfter;
  }

  /**
   * Opens (or creates) the folder: takes its lock and reads the journal. Idempotent; a failed start
   * is tried again by the next call. Rejects with LOCKED when another process uses the folder,
   * CORRUPT_DATA when the journal is damaged anywhere but in its last, unfinished line (which a
   * crash mid-write leaves and which is dropped: it was never acknowledged).
   */
  start(): Promise<void> {
    if (this.closed) return Promise.reject(closedError(`the embedded segment store ${this.dir}`));
    this.starting ??= this.openFolder().catch((error: unknown) => {
      this.starting = undefined;
      throw error;
    });
    return this.starting;
  }

  private async openFolder(): Promise<void> {
    const opened = await openFolder(this.settings);
    if (this.closed) {
      await opened.file.close().catch(() => undefined);
      opened.lock.release();
      throw closedError(`the embedded segment store ${this.dir}`);
    }
    this.file = opened.file;
    this.fileId = opened.fileId;
    this.size = opened.size;
    this.lock = opened.lock;
    this.rows = opened.state.rows;
    // Filled in place: operations queued before the folder was opened hold this map.
    for (const [tag, maxId] of opened.state.deleted) this.deleted.set(tag, maxId);
    this.appendedSinceCompaction = opened.state.records;
  }

  async listTags(): Promise<string[]> {
    return this.enqueue(() => ({ value: [...this.rows.keys()] }));
  }

  async describeTags(): Promise<TagRecord[]> {
    return this.enqueue(describeOp);
  }

  async takeRange(tag: string, step?: number, floor?: bigint): Promise<SegmentRange> {
    checkTag(tag);
    if (step !== undefined) checkStep(step);
    checkFloor(floor);
    return this.enqueue(takeRangeOp(tag, step, this.where, this.floors, floor));
  }

  /**
   * Gives back `[from, end)` (see {@link SegmentStore.giveBack}) when the tag's max id is still
   * `end`: appends a `put` record restating the tag with max id `from` (and `"back"`, the max id it
   * replaced), written and fsynced before it resolves, so a restart starts the next range at
   * `from`.
   */
  async giveBack(tag: string, from: bigint, end: bigint): Promise<boolean> {
    if (this.floors.checkGiveBack(tag, from, end) === "moved-on") return false;
    return this.enqueue(giveBackOp(tag, from, end, this.floors));
  }

  /**
   * Refuses (ALREADY_EXISTS, reason "deleted") a start id below the max id the tag was deleted
   * with.
   */
  async createTag(input: NewTag): Promise<TagRecord> {
    return this.enqueue(createTagOp(input, this.where, this.deleted));
  }

  async updateStep(tag: string, step: number): Promise<TagRecord> {
    checkTag(tag);
    checkStep(step);
    return this.enqueue(updateStepOp(tag, step, this.where));
  }

  /**
   * Answers the tag's record as deleted: the write queue applies calls one at a time, so no range
   * is taken between the read and the delete. The `delete` record carries the max id, kept by
   * compaction, so a restarted store still refuses to create the tag below it.
   */
  async deleteTag(tag: string): Promise<TagRecord | undefined> {
    checkTag(tag);
    return this.enqueue(deleteTagOp(tag, this.deleted));
  }

  /** Counters and whether (and why) the store refuses calls right now. */
  stats(): EmbeddedStoreStats {
    return {
      ...this.counters,
      refusing: (this.lost ?? this.failure)?.message,
      lost: this.lost !== undefined,
    };
  }

  /** Waits for pending writes, closes the journal and releases the lock. Idempotent. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.starting?.catch(() => undefined);
    while (this.writing) await this.writing;
    try {
      await this.file?.close();
    } finally {
      // Removes the lock file only if it still names this store: a lost folder's new owner keeps
      // it.
      this.lock?.release();
    }
  }

  private enqueue<T>(apply: RowOp<T>): Promise<T> {
    if (this.closed) return Promise.reject(closedError(`the embedded segment store ${this.dir}`));
    if (this.lost) return Promise.reject(this.lost);
    if (!this.lock) return this.start().then(() => this.enqueue(apply));
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
      if (this.failure && !this.lost) await this.recover();
      const refusal = this.lost ?? this.failure;
      if (refusal) {
        for (const pending of batch) pending.reject(refusal);
        continue;
      }
      const now = Date.now();
      const undos: (() => void)[] = [];
      const done: { pending: Pending; value: unknown }[] = [];
      let text = "";
      let records = 0;
      for (const pending of batch) {
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
          await this.append(Buffer.from(text, "utf8"));
          this.appendedSinceCompaction += records;
        } catch (error) {
          for (const undo of undos.reverse()) undo();
          for (const { pending } of done) pending.reject(error);
          continue;
        }
      }
      for (const { pending, value } of done) pending.resolve(value);
      const kept = this.rows.size + this.deleted.size;
      if (this.appendedSinceCompaction >= kept + this.compactAfter) await this.compact();
    }
  }

  /**
   * Appends `bytes` to the journal: checks the folder is still ours, writes every byte (a write may
   * write fewer than asked: a full disk, a file size limit), fsyncs, and checks again. Throws, and
   * leaves the store refusing, on any shortfall: nothing of a failed append is acknowledged.
   */
  private async append(bytes: Buffer): Promise<void> {
    this.checkOwnership("before writing to");
    const file = this.file!;
    let written = 0;
    try {
      while (written < bytes.length) {
        const { bytesWritten } = await file.write(bytes, written, bytes.length - written);
        if (bytesWritten <= 0) throw new Error("the write wrote no bytes");
        written += bytesWritten;
      }
      await file.datasync();
    } catch (cause) {
      throw this.fail(writeError(this.journalPath, cause, written, bytes.length));
    }
    this.size += bytes.length;
    this.counters.appends++;
    // Paused between the first check and the write, a store may have lost the folder: its write
    // then went to a journal another process reads. It must not acknowledge it.
    this.checkOwnership("after writing to");
  }

  /**
   * Throws LOCKED (and stops the store for good) unless the lock file is still this store's and
   * (with `journal`) the journal's path still names the file it appends to, at the size it wrote.
   */
  private checkOwnership(when: string, journal = true): void {
    if (this.lost) throw this.lost;
    let owns: boolean;
    try {
      owns = this.lock!.owns();
    } catch (cause) {
      // Ownership not proven: no write, but nothing says the folder is lost either.
      throw this.fail(
        new LeafError({
          component: COMPONENT,
          code: ErrorCodes.UNAVAILABLE,
          message: `cannot read the lock file ${this.lock!.path} (${describeCause(cause)}), so this store cannot tell that the data folder is still its own; it refuses every call until it can: fix the file system`,
          details: { path: this.lock!.path },
          cause,
        }),
      );
    }
    let problem: string | undefined;
    if (!owns) {
      const owner = safeReadLock(this.lock!.path);
      problem =
        `its lock file ${this.lock!.path} is no longer its own ` +
        (typeof owner === "object"
          ? `(now held by pid ${owner.pid} on host ${owner.host} since ${new Date(owner.acquiredAt).toISOString()})`
          : "(removed or replaced)");
    } else if (journal) {
      let stat: { dev: number; ino: number; size: number } | undefined;
      try {
        stat = statSync(this.journalPath);
      } catch {
        stat = undefined;
      }
      if (!stat) problem = `the journal ${this.journalPath} is gone`;
      else if (stat.dev !== this.fileId.dev || stat.ino !== this.fileId.ino) {
        problem = `the journal ${this.journalPath} was replaced by another file`;
      } else if (stat.size !== this.size) {
        problem = `the journal ${this.journalPath} is ${stat.size} bytes, but this store wrote ${this.size}: another process wrote to it`;
      }
    }
    if (problem === undefined) return;
    throw this.fail(
      new LeafError({
        component: COMPONENT,
        code: ErrorCodes.LOCKED,
        message:
          `the embedded store lost its data folder ${this.dir} (found ${when} the journal): ${problem}. ` +
          "Another process may be handing out ranges from it, so this store hands out none any more: " +
          "close it, find out which process took the folder, and open the store again once only one " +
          "process uses the folder",
        details: { path: this.dir },
      }),
      true,
    );
  }

  /** Records a refusal (for good when `final`), tells `onFailure`, and returns the error. */
  private fail(error: LeafError, final = false): LeafError {
    const first = !(this.lost ?? this.failure);
    if (final) this.lost = error;
    else this.failure = error;
    if (!final) this.counters.failedWrites++;
    if (first || final) {
      try {
        this.settings.onFailure?.(error);
      } catch {
        // A failing listener must not hide the store's own error.
      }
    }
    return error;
  }

  /**
   * After a failed write or reopen: makes the journal the file at its path again (reopening it when
   * a compaction could not), cuts off whatever a failed write left after the last acknowledged
   * byte, and verifies that the journal holds complete lines only and exactly the tags and max ids
   * this store handed out. Only then does the store serve again; until then `failure` stays set
   * (with the latest reason) and every call is refused.
   */
  private async recover(): Promise<void> {
    try {
      // The journal itself may differ from what was written (a failed write's bytes): judged below.
      this.checkOwnership("while repairing", false);
    } catch {
      return;
    }
    let stage: "reopen" | "repair" = "repair";
    try {
      let onDisk = statSync(this.journalPath);
      if (!this.file || onDisk.dev !== this.fileId.dev || onDisk.ino !== this.fileId.ino) {
        stage = "reopen";
        const old = this.file;
        this.file = undefined;
        await old?.close().catch(() => {});
        const file = await this.settings.openFile(this.journalPath);
        this.file = file;
        this.fileId = idOf(fstatSync(file.fd));
        stage = "repair";
      } else if (onDisk.size > this.size) {
        await this.file.truncate(this.size);
        await this.file.datasync();
      }
      const text = readFileSync(this.journalPath, "utf8");
      onDisk = statSync(this.journalPath);
      if (onDisk.dev !== this.fileId.dev || onDisk.ino !== this.fileId.ino) {
        throw new Error("the journal was replaced while it was being verified");
      }
      const parsed = parseJournal(this.journalPath, text);
      if (!parsed.header || parsed.validBytes !== parsed.totalBytes) {
        throw new Error(
          `it does not end with a complete record (${parsed.totalBytes} bytes, ${parsed.validBytes} of them complete lines)`,
        );
      }
      const differs = rowsDiffer(this.rows, parsed.rows);
      if (differs) {
        this.fail(
          new LeafError({
            component: COMPONENT,
            code: ErrorCodes.CORRUPT_DATA,
            message:
              `the journal ${this.journalPath} does not hold what this store handed out (${differs}); ` +
              "this store hands out no more ranges: close it, and check the journal before opening it " +
              "again (its max ids must be at least those handed out)",
            details: { path: this.journalPath },
          }),
          true,
        );
        return;
      }
      this.size = parsed.totalBytes;
      this.appendedSinceCompaction = parsed.records;
      this.failure = undefined;
      this.counters.recoveries++;
    } catch (cause) {
      if (cause instanceof LeafError && cause.code === ErrorCodes.CORRUPT_DATA) {
        this.fail(cause, true);
        return;
      }
      this.failure =
        stage === "reopen"
          ? reopenError(this.journalPath, cause)
          : new LeafError({
              component: COMPONENT,
              code: ErrorCodes.UNAVAILABLE,
              message:
                `could not repair the journal ${this.journalPath} after a failed write: ${describeCause(cause)}; ` +
                "the store refuses every call until it has cut the journal back to its last complete " +
                "record and verified it: free disk space or fix the file system; the next call tries again",
              details: { path: this.journalPath, reason: describeCause(cause) },
              cause,
            });
    }
  }

  /**
   * Rewrites the journal as one line per tag, atomically (temp file, fsync, rename), then appends
   * to the new file. If the new file cannot be opened the store refuses every call until a later
   * call reopens and verifies it: it never appends to the replaced, unlinked file.
   */
  private async compact(): Promise<void> {
    this.appendedSinceCompaction = this.rows.size + this.deleted.size;
    try {
      this.checkOwnership("before compacting");
    } catch {
      return;
    }
    const text = snapshotText(this.rows, this.deleted);
    try {
      // Checked again after the snapshot's fsync, which holds the event loop (and the lock's
      // heartbeat) for as long as the disk takes: a holder stalled there past a lock takeover must
      // not rename its snapshot over the new holder's journal.
      writeFileAtomic(this.journalPath, text, () => this.checkOwnership("before replacing"));
    } catch (cause) {
      // Lost meanwhile: the journal is the new holder's, untouched; the store refuses every call.
      if (this.lost) return;
      // Before the rename the old journal is complete and still ours; after it, it is not.
      if (this.journalIsOurs()) return;
      this.fail(reopenError(this.journalPath, cause));
      return;
    }
    const old = this.file;
    this.file = undefined;
    await old?.close().catch(() => {});
    try {
      const file = await this.settings.openFile(this.journalPath);
      this.file = file;
      this.fileId = idOf(fstatSync(file.fd));
      this.size = Buffer.byteLength(text, "utf8");
      this.checkOwnership("after compacting");
    } catch (cause) {
      if (!this.lost) this.fail(reopenError(this.journalPath, cause));
    }
  }

  private journalIsOurs(): boolean {
    try {
      const stat = statSync(this.journalPath);
      return stat.dev === this.fileId.dev && stat.ino === this.fileId.ino;
    } catch {
      return false;
    }
  }
}
