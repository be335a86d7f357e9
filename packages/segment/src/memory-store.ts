// A segment store in process memory: for tests, benches and embedding a generator where ids need
// to be unique only while the process lives. Nothing survives a restart.

import { checkExpectedVersion, checkResidueRecord } from "./residue-record";
import type { NewTag, ResidueRecord, SegmentRange, SegmentStore, TagRecord } from "./segment-store";
import {
  badStoredMaxId,
  badStoredStep,
  belowDeletedTag,
  checkStep,
  checkTag,
  closedError,
  floorOf,
  MAX_ID,
  MAX_STEP,
  maxIdMovedBack,
  normalizeNewTag,
  RangeFloors,
  rangeOverflow,
  tagExists,
  unknownTag,
} from "./validation";

interface MemoryRow {
  maxId: bigint;
  step: number;
  description: string | null;
  updatedAt: number;
}

/**
 * Storage that several {@link MemorySegmentStore} instances may share, standing for several
 * processes on one table. Create it with `new MemorySegmentData()`.
 */
export class MemorySegmentData {
  /** @internal rows by tag */
  readonly rows = new Map<string, MemoryRow>();
  /** @internal the highest max id each deleted tag was deleted with */
  readonly deleted = new Map<string, bigint>();
  /** @internal the residue record, when this storage is a database of a residue set */
  residue: ResidueRecord | undefined = undefined;
}

/** Options of {@link MemorySegmentStore}. */
export interface MemorySegmentStoreOptions {
  /** Storage shared with other instances (default: a new, empty one). */
  data?: MemorySegmentData;
  /** Milliseconds since the Unix epoch for `updatedAt` (default Date.now). */
  now?: () => number;
}

/**
 * A {@link SegmentStore} in memory. Every call completes in a microtask; ranges are disjoint across
 * every instance sharing one {@link MemorySegmentData}. Not durable: ids repeat after a restart.
 */
export class MemorySegmentStore implements SegmentStore {
  readonly kind = "memory";
  private readonly data: MemorySegmentData;
  private readonly now: () => number;
  /** Ends of the ranges this instance handed out: a max id moved below them is refused. */
  private readonly floors = new RangeFloors();
  private closed = false;

  constructor(options: MemorySegmentStoreOptions = {}) {
    this.data = options.data ?? new MemorySegmentData();
    this.now = options.now ?? Date.now;
  }

  async listTags(): Promise<string[]> {
    this.checkOpen();
    return [...this.data.rows.keys()];
  }

  async describeTags(): Promise<TagRecord[]> {
    this.checkOpen();
    return [...this.data.rows.entries()]
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([tag, row]) => toRecord(tag, row));
  }

  async takeRange(tag: string, step?: number, given?: bigint): Promise<SegmentRange> {
    this.checkOpen();
    checkTag(tag);
    if (step !== undefined) checkStep(step);
    const { floor, mark } = floorOf(this.floors, tag, given);
    const row = this.data.rows.get(tag);
    if (!row) throw unknownTag(tag, "the memory store");
    // The shared rows stand for a table other code may write to: check them as a row read from SQL.
    if (!Number.isInteger(row.step) || row.step < 1 || row.step > MAX_STEP) {
      throw badStoredStep(tag, row.step, "the memory store");
    }
    if (typeof row.maxId !== "bigint" || row.maxId < 0n) {
      throw badStoredMaxId(tag, BigInt(row.maxId), "the memory store");
    }
    if (row.maxId < floor)
      throw maxIdMovedBack(tag, row.maxId, floor, "the memory store", { mark });
    const used = step ?? row.step;
    const end = row.maxId + BigInt(used);
    if (end > MAX_ID) throw rangeOverflow(tag, row.maxId, used);
    const start = row.maxId;
    row.maxId = end;
    row.updatedAt = this.now();
    this.floors.raise(tag, end, "memory", start);
    return { tag, start, end, step: used, tableStep: row.step };
  }

  /**
   * Gives back `[from, end)` when the max id is still `end` (see {@link SegmentStore.giveBack}).
   */
  async giveBack(tag: string, from: bigint, end: bigint): Promise<boolean> {
    this.checkOpen();
    if (this.floors.checkGiveBack(tag, from, end) === "moved-on") return false;
    const row = this.data.rows.get(tag);
    if (!row || row.maxId !== end) return false;
    row.maxId = from;
    row.updatedAt = this.now();
    this.floors.lower(tag, from);
    return true;
  }

  async createTag(input: NewTag): Promise<TagRecord> {
    this.checkOpen();
    const tag = normalizeNewTag(input);
    if (this.data.rows.has(tag.tag)) throw tagExists(tag.tag, "the memory store");
    const floor = this.data.deleted.get(tag.tag);
    if (floor !== undefined && floor > tag.startId) {
      throw belowDeletedTag(tag.tag, tag.startId, floor, "the memory store");
    }
    const row: MemoryRow = {
      maxId: tag.startId,
      step: tag.step,
      description: tag.description,
      updatedAt: this.now(),
    };
    this.data.rows.set(tag.tag, row);
    return toRecord(tag.tag, row);
  }

  async updateStep(tag: string, step: number): Promise<TagRecord> {
    this.checkOpen();
    checkTag(tag);
    checkStep(step);
    const row = this.data.rows.get(tag);
    if (!row) throw unknownTag(tag, "the memory store");
    row.step = step;
    row.updatedAt = this.now();
    return toRecord(tag, row);
  }

  async deleteTag(tag: string): Promise<TagRecord | undefined> {
    this.checkOpen();
    checkTag(tag);
    const row = this.data.rows.get(tag);
    if (!row) return undefined;
    this.data.rows.delete(tag);
    const before = this.data.deleted.get(tag);
    // A give-back onto a re-created row can leave it below the max id the tag was deleted with
    // before: the answer is the higher, where a re-create may start.
    const maxId = before === undefined || row.maxId > before ? row.maxId : before;
    this.data.deleted.set(tag, maxId);
    return { ...toRecord(tag, row), maxId };
  }

  /** The residue record of the shared storage (see {@link SegmentStore.readResidue}). */
  async readResidue(): Promise<ResidueRecord | undefined> {
    this.checkOpen();
    return this.data.residue === undefined ? undefined : { ...this.data.residue };
  }

  /** Writes the residue record when its version is `expectedVersion` (compare-and-set). */
  async writeResidue(next: ResidueRecord, expectedVersion: number | null): Promise<boolean> {
    this.checkOpen();
    checkResidueRecord(next, "next");
    checkExpectedVersion(expectedVersion);
    if ((this.data.residue?.version ?? null) !== expectedVersion) return false;
    this.data.residue = { ...next };
    return true;
  }

  async close(): Promise<void> {
    this.closed = true;
  }

  private checkOpen(): void {
    if (this.closed) throw closedError("the memory segment store");
  }
}

function toRecord(tag: string, row: MemoryRow): TagRecord {
  return {
    tag,
    maxId: row.maxId,
    step: row.step,
    description: row.description,
    updatedAt: row.updatedAt,
  };
}
