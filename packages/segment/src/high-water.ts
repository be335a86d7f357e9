// A node's memory of how far each tag went: per store, the end of the highest range this node took,
// kept in a file of its data folder and read at start, so that a restarted node refuses a max id
// that moved back below ids it handed out (a hand edit, a promoted replica that missed writes).
import { mkdir, open, readdir, readFile, rename, unlink } from "node:fs/promises";
import { join, resolve } from "node:path";
import { ErrorCodes, LeafError } from "@leaf/core";
import { acquireLockFile, type HeldLockFile } from "@leaf/core/adapter";
import { COMPONENT, MAX_ID } from "./validation";

/** Name of the high-water file in its folder. */
export const HIGH_WATER_FILE = "segment-high-water.json";
/** Name of the lock file that keeps a second process off the folder. */
export const HIGH_WATER_LOCK = "segment-high-water.lock";

const FORMAT = "leaf-segment-high-water";
const VERSION = 1;

/** {@link SegmentGeneratorOptions.highWater}: where a node keeps its high-water marks. */
export interface HighWaterOptions {
  /**
   * The folder (created when missing). It must outlive the process: a container needs a volume
   * here, or a restarted node starts with no memory and cannot tell a max id moved back.
   */
  dir: string;
  /**
   * Names the id space the store holds, so that marks taken from one store never judge another:
   * for MySQL the database and table (`leaf.leaf_alloc`), without the hosts, so that a failover or
   * a URL pointed at a promoted replica is still the same store; for the embedded store its folder.
   */
  storeId: string;
  /**
   * A lock file written on another host, boot or PID namespace (another container on the volume)
   * counts as stale once untouched this long, in ms (default 30,000). A lock of a dead process on
   * the same host is taken over at once.
   */
  lockStaleAfterMs?: number;
}

/**
 * The high-water marks of one store in a folder: `raise` is durable (written to a temp file,
 * fsynced, renamed over the file, the folder fsynced) before it resolves, so a range is served only
 * once its end is on disk; concurrent changes share one write. One process holds the folder (a
 * lock file); other stores' marks in the same file are kept as they are.
 */
export class HighWaterMarks {
  /** The high-water file. */
  readonly path: string;
  readonly storeId: string;
  private readonly dir: string;
  private readonly staleAfterMs: number;
  private readonly marks = new Map<string, bigint>();
  /**
   * Per tag, the highest max id this node read in the store's row (a refresh reads every row): it
   * shows how far other nodes took ranges, up to this node's last read.
   */
  private readonly seen = new Map<string, bigint>();
  /** Marks (and observed max ids) of other stores found in the file, written back unchanged. */
  private readonly others = new Map<string, unknown>();
  private readonly othersSeen = new Map<string, unknown>();
  private lock: HeldLockFile | undefined;
  private opening: Promise<void> | undefined;
  /** The last write queued (each starts after the one before ends). */
  private chain: Promise<void> = Promise.resolve();
  /** A write queued and not started yet: a change made now is carried by it. */
  private pending: Promise<void> | undefined;
  private temps = 0;
  /** A write failed: the file may lack a mark held in memory, so the next call writes again. */
  private unsaved = false;

  constructor(options: HighWaterOptions) {
    this.dir = resolve(options.dir);
    this.path = join(this.dir, HIGH_WATER_FILE);
    this.storeId = options.storeId;
    this.staleAfterMs = options.lockStaleAfterMs ?? 30_000;
  }

  /**
   * Takes the folder's lock and reads the file. Rejects with LOCKED when another process holds the
   * folder, CORRUPT_DATA when the file is not a high-water file (the node would not know its
   * marks).
   */
  open(): Promise<void> {
    this.opening ??= this.doOpen().catch((error: unknown) => {
      this.opening = undefined;
      throw error;
    });
    return this.opening;
  }

  private async doOpen(): Promise<void> {
    await mkdir(this.dir, { recursive: true });
    const lock = acquireLockFile(join(this.dir, HIGH_WATER_LOCK), {
      component: COMPONENT,
      resource: `the segment high-water folder ${this.dir}`,
      advice: "give each node its own data folder",
      foreignStaleAfterMs: this.staleAfterMs,
    });
    try {
      const text = await readFile(this.path, "utf8").catch((error: NodeJS.ErrnoException) => {
        if (error.code === "ENOENT") return undefined;
        throw error;
      });
      if (text !== undefined) this.parse(text);
      // Temp files of writes cut short by a crash: never renamed into place, never read.
      for (const name of await readdir(this.dir)) {
        if (name.startsWith(`${HIGH_WATER_FILE}.`) && name.endsWith(".tmp")) {
          await unlink(join(this.dir, name)).catch(() => {});
        }
      }
    } catch (error) {
      lock.release();
      throw error;
    }
    this.lock = lock;
  }

  /** The stored end of the highest range this node took of `tag` from this store, if any. */
  get(tag: string): bigint | undefined {
    return this.marks.get(tag);
  }

  /** Every mark of this store, by tag. */
  all(): ReadonlyMap<string, bigint> {
    return this.marks;
  }

  /**
   * The highest max id of `tag` this node read in the store (as on disk once `observe` resolved).
   */
  seenOf(tag: string): bigint | undefined {
    return this.seen.get(tag);
  }

  /** Every observed max id of this store, by tag. */
  allSeen(): ReadonlyMap<string, bigint> {
    return this.seen;
  }

  /**
   * Records the max ids read in the store's rows (`rows`: tag and max id), keeping the highest per
   * tag, and resolves once the file holds them (no write when none rose). Rejects as `raise`.
   */
  async observe(rows: Iterable<{ tag: string; maxId: bigint }>): Promise<void> {
    let rose = false;
    for (const { tag, maxId } of rows) {
      const seen = this.seen.get(tag);
      if (seen !== undefined && seen >= maxId) continue;
      this.seen.set(tag, maxId);
      rose = true;
    }
    if (rose) await this.persist();
  }

  /**
   * Raises the mark of `tag` to `end` (no change when it is at or above already) and resolves once
   * the file on disk holds it. Rejects with UNAVAILABLE when the file cannot be written (the caller
   * must not serve the range), LOCKED when the folder is no longer this process's.
   */
  async raise(tag: string, end: bigint): Promise<void> {
    const mark = this.marks.get(tag);
    if (mark !== undefined && mark >= end && !this.unsaved) return;
    if (mark === undefined || mark < end) this.marks.set(tag, end);
    await this.persist();
  }

  /**
   * Lowers the mark of `tag` to `to` (the first id this node never handed out, before it gives the
   * rest of its ranges `[to, end)` back to the store), durably; no change when it is at or below
   * already. `handedOut`, when below `to`, is where the mark goes instead: one past the highest id
   * this node handed out, when the ids it gives back start at a range it never served. The
   * observed max id comes down to `to` (never below) when it is not above `end` (then it only saw
   * this node's own ranges); one above `end` stays (the give-back will not match).
   */
  async lower(tag: string, to: bigint, end: bigint, handedOut?: bigint): Promise<void> {
    const mark = this.marks.get(tag);
    const seen = this.seen.get(tag);
    const markTo = handedOut !== undefined && handedOut < to ? handedOut : to;
    const lowerSeen = seen !== undefined && seen > to && seen <= end;
    if ((mark === undefined || mark <= markTo) && !lowerSeen) return;
    if (mark !== undefined && mark > markTo) this.marks.set(tag, markTo);
    if (lowerSeen) this.seen.set(tag, to);
    await this.persist();
  }

  /**
   * Forgets the mark of `tag` (an operator's call once the tag's max id is known to be right, or
   * the store is another one); resolves with the mark forgotten, once written.
   */
  async forget(tag: string): Promise<bigint | undefined> {
    const mark = this.marks.get(tag);
    const seen = this.seen.delete(tag);
    if (mark === undefined && !seen) return undefined;
    this.marks.delete(tag);
    await this.persist();
    return mark;
  }

  /** Waits for writes queued, then releases the folder's lock. */
  async close(): Promise<void> {
    await this.chain.catch(() => {});
    this.lock?.release();
    this.lock = undefined;
  }

  private persist(): Promise<void> {
    if (this.pending !== undefined) return this.pending;
    const write = this.chain
      .catch(() => {})
      .then(() => {
        this.pending = undefined;
        this.unsaved = false;
        return this.write(this.serialize()).catch((error: unknown) => {
          this.unsaved = true;
          throw error;
        });
      });
    this.pending = write;
    this.chain = write;
    return write;
  }

  private async write(text: string): Promise<void> {
    const temp = `${this.path}.${process.pid}.${this.temps++}.tmp`;
    try {
      this.checkOwned();
      const file = await open(temp, "w", 0o644);
      try {
        await file.writeFile(text);
        await file.datasync();
      } finally {
        await file.close();
      }
      this.checkOwned();
      await rename(temp, this.path);
      const dir = await open(this.dir, "r");
      try {
        await dir.sync();
      } finally {
        await dir.close();
      }
    } catch (cause) {
      await unlink(temp).catch(() => {});
      if (cause instanceof LeafError) throw cause;
      throw new LeafError({
        component: COMPONENT,
        code: ErrorCodes.UNAVAILABLE,
        message: `the high-water file ${this.path} could not be written (${(cause as Error).message}): the range is not served, so that a restart cannot forget it; free the disk or fix the folder's permissions`,
        details: { path: this.path },
        cause,
      });
    }
  }

  private checkOwned(): void {
    if (this.lock?.owns()) return;
    throw new LeafError({
      component: COMPONENT,
      code: ErrorCodes.LOCKED,
      message: `the segment high-water folder ${this.dir} is no longer this process's (its lock file was removed or taken over): no range is served; restart the node`,
      details: { path: this.path },
    });
  }

  // Objects keyed by tag or store are built with Object.fromEntries (own properties, whatever the
  // name: "__proto__" included) and read back with Object.entries, never by assignment.
  private serialize(): string {
    const section = (others: Map<string, unknown>, own: Map<string, bigint>) => {
      const entries = new Map(others);
      entries.delete(this.storeId);
      if (own.size > 0) {
        const sorted = [...own].sort(([a], [b]) => (a < b ? -1 : 1));
        entries.set(this.storeId, Object.fromEntries(sorted.map(([t, v]) => [t, v.toString()])));
      }
      return Object.fromEntries(entries);
    };
    const stores = section(this.others, this.marks);
    const seen = section(this.othersSeen, this.seen);
    return `${JSON.stringify({ format: FORMAT, version: VERSION, stores, seen }, null, 1)}\n`;
  }

  private parse(text: string): void {
    const damaged = (what: string) =>
      new LeafError({
        component: COMPONENT,
        code: ErrorCodes.CORRUPT_DATA,
        message: `the high-water file ${this.path} is damaged (${what}): this node cannot tell whether a tag's max id moved back below ids it handed out. Restore it from a backup, or delete it to start with no memory (then fix every max_id first)`,
        details: { path: this.path },
      });
    let data: unknown;
    try {
      data = JSON.parse(text);
    } catch {
      throw damaged("not JSON");
    }
    const head = data as { format?: unknown; version?: unknown; stores?: unknown; seen?: unknown };
    if (head?.format !== FORMAT || head.version !== VERSION) {
      throw damaged(`not a ${FORMAT} file of version ${VERSION}`);
    }
    if (typeof head.stores !== "object" || head.stores === null) throw damaged("no stores");
    const read = (
      section: object,
      own: Map<string, bigint>,
      others: Map<string, unknown>,
      what: string,
    ) => {
      for (const [store, tags] of Object.entries(section)) {
        if (typeof tags !== "object" || tags === null)
          throw damaged(`store ${store} holds no tags`);
        for (const [tag, end] of Object.entries(tags)) {
          if (typeof end !== "string" || !/^(0|[1-9][0-9]*)$/.test(end) || BigInt(end) > MAX_ID) {
            throw damaged(
              `${what} of tag ${JSON.stringify(tag)} of store ${store}: ${JSON.stringify(end)}`,
            );
          }
          if (store === this.storeId) own.set(tag, BigInt(end));
        }
        if (store !== this.storeId) others.set(store, tags);
      }
    };
    read(head.stores, this.marks, this.others, "mark");
    // Written since the observed max ids were added; a file without them observed nothing yet.
    if (head.seen !== undefined) {
      if (typeof head.seen !== "object" || head.seen === null) throw damaged("seen is no object");
      read(head.seen, this.seen, this.othersSeen, "observed max id");
    }
  }
}

/**
 * CORRUPT_DATA for a tag whose stored max id (or the range the store answered, `taken`) is below
 * the end of the highest range this node took before, as its high-water file remembers.
 */
export function belowHighWater(
  marks: HighWaterMarks,
  tag: string,
  maxId: bigint,
  mark: bigint,
  where: string,
  taken: boolean,
): LeafError {
  return new LeafError({
    component: COMPONENT,
    code: ErrorCodes.CORRUPT_DATA,
    message:
      `refused ${taken ? "the range" : "to take a range"} of tag ${JSON.stringify(tag)}: its max id ${taken ? "was" : "is"} ${maxId} in ${where}, ` +
      `below ${mark}, the end of the highest range this node took from it (remembered in ${marks.path}), so ids would repeat: ` +
      `its max id was moved back, the tag re-created lower, or the store is a replica that missed writes. ${taken ? "No id of the range was handed out" : "Nothing was changed"}; ` +
      `the tag stays refused until its max id is set to at least ${mark} (and above the highest id every server handed out), or this node is told to forget its mark`,
    details: {
      tag,
      reason: "max-id-moved-back",
      maxId: maxId.toString(),
      floor: mark.toString(),
      highWater: mark.toString(),
      highWaterFile: marks.path,
    },
  });
}
