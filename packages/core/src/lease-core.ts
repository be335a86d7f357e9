// What every WorkerLease does the same way, whatever its store: the lost signal and its one
// LEASE_LOST error, the highest timestamp per held id, reports run one at a time, an idempotent
// release, `fenceAt` once the lease has ended and the adapter's confirmed `horizon`. An adapter's
// lease extends LeaseCore and writes only its store calls (as CosId's
// AbstractMachineIdDistributor).
import { checkReport, checkReportedTimestamp } from "./acquire-request";
import { ErrorCodes, LeafCodes, LeafError } from "./errors";
import type { BackupWorker, WorkerLease } from "./registry";

/** What {@link leaseLostError} is told. */
export interface LeaseLostOptions {
  /** The package or part that noticed: "registry-zk", "core", ... */
  component: string;
  /** The worker id whose lease is lost (the primary, or the backup whose hold failed). */
  workerId: number;
  /** What happened, e.g. "session expired" or "its row was deleted". */
  why: string;
  /** What the holder must do now (default "no id may be issued under it any more"). */
  advice?: string;
  /** Facts for logs and HTTP answers; `workerId` is always added. */
  details?: Record<string, unknown>;
  cause?: unknown;
}

/**
 * The LEASE_LOST error (Leaf fork code -4) of every lease and generator:
 * `[leaf] [component] worker id 7 lease lost: why; advice`.
 */
export function leaseLostError(options: LeaseLostOptions): LeafError {
  const { component, workerId, why } = options;
  return new LeafError({
    component,
    code: ErrorCodes.LEASE_LOST,
    leafCode: LeafCodes.LEASE_LOST,
    message: `worker id ${workerId} lease lost: ${why}; ${options.advice ?? "no id may be issued under it any more"}`,
    details: { workerId, ...options.details },
    cause: options.cause,
  });
}

/** What a {@link LeaseCore} is granted with. */
export interface LeaseGrant {
  /** The adapter's component name, for its errors ("registry-zk", "registry-mysql", ...). */
  component: string;
  /** The primary worker id. */
  workerId: number;
  /** Highest timestamp (ms since the Unix epoch) stored for the primary id; 0 when never used. */
  lastTimestamp: number;
  /** The backup ids leased with it, each with its stored timestamp (default none). */
  backups?: readonly BackupWorker[];
}

/** Options of {@link LeaseCore.lose}. */
export interface LoseOptions {
  /** The id whose hold failed, when not the primary (it is named in the message). */
  workerId?: number;
  /** What the holder must do now (see {@link LeaseLostOptions.advice}). */
  advice?: string;
  details?: Record<string, unknown>;
  cause?: unknown;
}

/**
 * The shared half of a {@link WorkerLease}. It owns:
 * - `lost`, aborted once through {@link lose} with {@link leaseLostError}; {@link onLost} runs
 *   then;
 * - the highest timestamp known per held id ({@link highest}), raised by every checked report and
 *   by the final timestamp of `release` (never lowered);
 * - a queue that runs reports, renewals and the release one at a time ({@link serial});
 * - `report`: rejects with the lost reason once lost, CLOSED once released, INVALID_ARGUMENT for a
 *   bad timestamp or a backup that is not this lease's (checkReport); then the adapter's
 *   {@link store} in the queue;
 * - `release`: checks the final timestamp, marks the lease released at once, runs the adapter's
 *   {@link free} once in the queue; later calls wait for it and resolve;
 * - `fenceAt`: 0 once lost or released, else the adapter's {@link liveFenceAt};
 * - `horizon`: the adapter's {@link liveHorizon}.
 */
export abstract class LeaseCore implements WorkerLease {
  readonly workerId: number;
  readonly lastTimestamp: number;
  readonly backups: readonly BackupWorker[];
  readonly lost: AbortSignal;
  /** The adapter's component name, for its errors. */
  protected readonly component: string;
  readonly #controller = new AbortController();
  readonly #highest = new Map<number, number>();
  #confirmed: number;
  /** The report queued and not yet started, which later reports join. */
  #waiting: { ids: Set<number>; done: Promise<void> } | undefined;
  #tail: Promise<unknown> = Promise.resolve();
  #releasing: Promise<void> | undefined;

  protected constructor(grant: LeaseGrant) {
    this.component = grant.component;
    this.workerId = grant.workerId;
    this.lastTimestamp = grant.lastTimestamp;
    this.backups = (grant.backups ?? []).map((b) => ({
      workerId: b.workerId,
      lastTimestamp: b.lastTimestamp,
    }));
    this.lost = this.#controller.signal;
    this.#confirmed = this.lastTimestamp;
    this.#highest.set(this.workerId, this.lastTimestamp);
    for (const b of this.backups) this.#highest.set(b.workerId, b.lastTimestamp);
  }

  /** True from the moment `release` is first called. */
  get released(): boolean {
    return this.#releasing !== undefined;
  }

  /**
   * The `performance.now()` instant after which no id may be issued under this lease (see
   * WorkerLease.fenceAt): 0 once lost or released, else {@link liveFenceAt}.
   */
  get fenceAt(): number | undefined {
    return this.lost.aborted || this.released ? 0 : this.liveFenceAt();
  }

  /** The adapter's deadline while the lease is live (default: none). */
  protected liveFenceAt(): number | undefined {
    return undefined;
  }

  /**
   * The latest timestamp (ms since the Unix epoch) the store confirmed ids may carry (see
   * WorkerLease.horizon): the adapter's {@link liveHorizon}.
   */
  get horizon(): number | undefined {
    return this.liveHorizon();
  }

  /** The adapter's confirmed horizon (default: none; the store keeps no horizon). */
  protected liveHorizon(): number | undefined {
    return undefined;
  }

  /**
   * The primary's highest timestamp stored where its next holder reads it (see
   * WorkerLease.confirmedTimestamp): the grant's, raised by every report the store confirmed.
   */
  get confirmedTimestamp(): number {
    return this.#confirmed;
  }

  /**
   * Records that `timestampMs` is stored for the primary where its next holder reads it (called by
   * `report` once `store` resolved; an adapter calls it sooner for a partial write that a restart
   * reads, e.g. a cache file). Never lowers it; other ids are ignored.
   */
  protected confirm(workerId: number, timestampMs: number): void {
    if (workerId === this.workerId && timestampMs > this.#confirmed) this.#confirmed = timestampMs;
  }

  /** The held worker ids: the primary, then the backups. */
  protected heldIds(): number[] {
    return [this.workerId, ...this.backups.map((b) => b.workerId)];
  }

  /**
   * The highest timestamp known for held id `workerId`: the one stored when granted, raised by
   * every report and the final timestamp since. 0 for an id this lease does not hold.
   */
  protected highest(workerId: number): number {
    return this.#highest.get(workerId) ?? 0;
  }

  /** Raises the known timestamp of held id `workerId` to `timestampMs` (never lowers it). */
  protected raise(workerId: number, timestampMs: number): void {
    const known = this.#highest.get(workerId);
    if (known !== undefined && timestampMs > known) this.#highest.set(workerId, timestampMs);
  }

  report(timestampMs: number, backups: readonly BackupWorker[] = []): Promise<void> {
    let reported: Map<number, number>;
    try {
      this.checkUsable();
      reported = checkReport(this.component, this, timestampMs, backups);
    } catch (error) {
      return Promise.reject(error);
    }
    for (const [workerId, timestamp] of reported) this.raise(workerId, timestamp);
    // A report still waiting behind a slow one is joined, not queued again: it writes the highest
    // timestamps when it runs, so reports called every period never pile up behind a slow store.
    if (this.#waiting) {
      for (const workerId of reported.keys()) this.#waiting.ids.add(workerId);
      return this.#waiting.done;
    }
    const waiting = { ids: new Set(reported.keys()), done: Promise.resolve() };
    this.#waiting = waiting;
    waiting.done = this.serial(async () => {
      if (this.#waiting === waiting) this.#waiting = undefined;
      if (this.lost.aborted) throw this.lost.reason;
      const latest = new Map([...waiting.ids].map((id) => [id, this.highest(id)]));
      await this.store(latest);
      this.confirm(this.workerId, latest.get(this.workerId) ?? 0);
    });
    return waiting.done;
  }

  release(finalTimestampMs?: number): Promise<void> {
    if (this.#releasing) return this.#releasing.catch(() => {});
    try {
      if (finalTimestampMs !== undefined) {
        checkReportedTimestamp(this.component, "finalTimestampMs", finalTimestampMs);
      }
    } catch (error) {
      return Promise.reject(error);
    }
    if (finalTimestampMs !== undefined) this.raise(this.workerId, finalTimestampMs);
    this.#releasing = this.serial(() => this.free(finalTimestampMs));
    return this.#releasing;
  }

  /**
   * Writes the reported timestamps to the store (`reported`: checked, per held id, the primary's
   * first; {@link highest} is already raised). Runs in the queue, never once the lease is lost.
   * Rejects UNAVAILABLE when the store cannot be reached, or with {@link lose}'s reason.
   */
  protected abstract store(reported: ReadonlyMap<number, number>): Promise<void>;

  /**
   * Gives the ids back as far as the mode allows, writing `finalTimestampMs` first when given and
   * the lease is not lost (the primary's {@link highest} already includes it). Runs once, in the
   * queue, after every report called before `release`; `released` is already true.
   */
  protected abstract free(finalTimestampMs: number | undefined): Promise<void>;

  /** Runs once, right after `lost` aborts: stop timers, close sessions, stop tracking. */
  protected onLost(_reason: LeafError): void {}

  /** Aborts `lost` once, with {@link leaseLostError} naming `why`; returns the reason. */
  protected lose(why: string, options: LoseOptions = {}): LeafError {
    if (!this.lost.aborted) {
      const reason = leaseLostError({
        component: this.component,
        workerId: options.workerId ?? this.workerId,
        why,
        advice: options.advice,
        details: {
          ...(this.backups.length > 0 ? { backups: this.backups.map((b) => b.workerId) } : {}),
          ...options.details,
        },
        cause: options.cause,
      });
      this.#controller.abort(reason);
      this.onLost(reason);
    }
    return this.lost.reason as LeafError;
  }

  /** Throws the lost reason once lost, CLOSED once released. */
  protected checkUsable(): void {
    if (this.lost.aborted) throw this.lost.reason;
    if (this.released) {
      throw new LeafError({
        component: this.component,
        code: ErrorCodes.CLOSED,
        message: `worker id ${this.workerId} lease was released: acquire a new one`,
        details: { workerId: this.workerId },
      });
    }
  }

  /** Runs `task` after every task queued before it has settled (reports, renewals, release). */
  protected serial<T>(task: () => Promise<T>): Promise<T> {
    const result = this.#tail.then(task, task);
    this.#tail = result.catch(() => {});
    return result;
  }
}
