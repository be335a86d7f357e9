// Wires a worker-id registry to a snowflake generator: acquire a lease, refuse to start when the
// clock is behind the lease's last timestamp (wait when within tolerance), report periodically,
// fence the generator the moment the lease is lost, and take a new lease afterwards.
import { backoffDelay, delay } from "./backoff";
import { type Clock, systemClock } from "./clock";
import { ErrorCodes, isLeafError, LeafError } from "./errors";
import { type Layout, layouts } from "./layout";
import { checkClockNotBehind } from "./lease-cache";
import { leaseLostError } from "./lease-core";
import type { BackupWorker, NodeIdentity, WorkerIdRegistry, WorkerLease } from "./registry";
import {
  type LeaseDeadline,
  SnowflakeGenerator,
  type SnowflakeOptions,
} from "./snowflake-generator";

const COMPONENT = "core";

/** Something that happened to a worker, for logs and metrics. */
export type SnowflakeWorkerEvent =
  | { type: "lease-acquired"; workerId: number; lastTimestamp: number; backups: number[] }
  | { type: "lease-lost"; workerId: number; error: LeafError }
  | { type: "report-failed"; workerId: number; error: unknown }
  | { type: "reported"; workerId: number; timestamp: number }
  | { type: "reacquire-failed"; attempt: number; error: unknown };

/** Options of {@link SnowflakeWorker}. */
export interface SnowflakeWorkerOptions {
  registry: WorkerIdRegistry;
  node: NodeIdentity;
  /** Bit layout (default Leaf's 41/10/12). */
  layout?: Layout;
  clock?: Clock;
  /**
   * How far the clock may be behind the lease's last timestamp, in ms, and still be waited out at
   * start (default: the generator's rollback tolerance, 5 ms). Further behind: start is refused.
   */
  startToleranceMs?: number;
  /**
   * Period of timestamp reports in ms (default 3,000, as Leaf). Every holder of the worker ids of
   * one registry must use the same period (or a shorter one): a new holder assumes that ids were
   * issued up to one period after the stored timestamp.
   */
  reportIntervalMs?: number;
  /**
   * Added to the report period when a lease's stored timestamp is turned into the instant ids may
   * start from (default 1,000 ms): it covers the time a report takes, from reading the clock to the
   * registry storing it.
   */
  restartMarginMs?: number;
  /** Delay of the first report in ms (default 1,000, as Leaf). */
  firstReportDelayMs?: number;
  /** Backup worker ids to lease with the primary one (default 0). */
  backups?: number;
  /**
   * The one worker id to ask the registry for, at start and after a lost lease (for example a
   * StatefulSet pod's ordinal); see `AcquireRequest.workerId`. Default: the registry chooses.
   */
  workerId?: number;
  /** Take a new lease after losing one (default true). The generator stays fenced until then. */
  reacquire?: boolean;
  /** Generator options other than those the lease decides. */
  generator?: Omit<SnowflakeOptions, "workerId" | "layout" | "clock" | "lastTimestamp" | "backups">;
  /** Receives what happens to the lease. */
  onEvent?: (event: SnowflakeWorkerEvent) => void;
}

/** What a {@link SnowflakeWorker} is doing. */
export type SnowflakeWorkerState = "held" | "fenced" | "closed";

/**
 * A snowflake generator running under a worker id leased from a registry.
 *
 * `new SnowflakeWorker(options)` checks nothing remote; `await worker.start()` acquires the lease,
 * refuses (CLOCK_BEHIND_LEASE, both times in the message) when the clock is behind the lease's last
 * timestamp by more than the tolerance, waits when within it, and builds the generator. Ids are
 * synchronous, so start() must have resolved before the first: before it they throw
 * NOT_INITIALIZED.
 */
export class SnowflakeWorker {
  private built: SnowflakeGenerator | undefined;
  /** The lease held now; undefined before start and while fenced and re-acquiring. */
  lease: WorkerLease | undefined;
  private starting: Promise<void> | undefined;
  /** The worker's own state; {@link state} adds the generator's fence. */
  private phase: SnowflakeWorkerState = "fenced";
  /** Timestamp (ms) of the last successful report, 0 before the first. */
  lastReportAt = 0;
  private readonly layout: Layout;
  private readonly clock: Clock;
  private readonly closing = new AbortController();
  private timer: NodeJS.Timeout | undefined;
  private reporting: Promise<void> | undefined;
  /** The primary timestamp of the last report the held lease resolved (see {@link deadline}). */
  private reportedConfirmed = 0;

  constructor(private readonly options: SnowflakeWorkerOptions) {
    this.layout = options.layout ?? layouts.leaf;
    this.clock = options.clock ?? systemClock;
  }

  /**
   * Acquires the lease and builds the generator. Idempotent; a failed start may be tried again.
   * @throws LeafError CLOCK_BEHIND_LEASE, the registry's errors (UNAVAILABLE, WORKER_IDS_EXHAUSTED,
   * ...), CLOSED.
   */
  start(): Promise<void> {
    if (this.phase === "closed") return Promise.reject(this.closedError());
    this.starting ??= this.doStart().catch((error: unknown) => {
      this.starting = undefined;
      throw error;
    });
    return this.starting;
  }

  /** The generator; NOT_INITIALIZED before {@link start} resolved. */
  get generator(): SnowflakeGenerator {
    if (!this.built) {
      throw new LeafError({
        component: COMPONENT,
        code: ErrorCodes.NOT_INITIALIZED,
        message: "the snowflake worker has not started: await worker.start() before taking ids",
      });
    }
    return this.built;
  }

  private async doStart(): Promise<void> {
    const lease = await this.acquire();
    try {
      await this.admit(lease);
      await this.confirmFirst(lease);
      const floors = this.floors(lease);
      this.built = new SnowflakeGenerator({
        ...this.options.generator,
        layout: this.layout,
        clock: this.clock,
        workerId: lease.workerId,
        lastTimestamp: floors.lastTimestamp,
        backups: floors.backups,
        lease: this.deadline(lease),
      });
    } catch (error) {
      await lease.release().catch(() => {});
      throw error;
    }
    this.hold(lease);
  }

  /**
   * "held": issuing ids; "fenced": no ids, because it has not started, the lease was lost
   * (re-acquiring), or the generator itself is fenced (its lease's deadline passed, or it was
   * fenced directly); "closed".
   */
  get state(): SnowflakeWorkerState {
    if (this.phase === "held" && this.built?.state === "fenced") return "fenced";
    return this.phase;
  }

  /** Issues one id (generator.nextId()). */
  nextId(): bigint {
    return this.generator.nextId();
  }

  /**
   * Issues one id as a JS number (generator.nextNumber()): INVALID_LAYOUT, with the reason, unless
   * the layout fits 53 bits.
   */
  nextNumber(): number {
    return this.generator.nextNumber();
  }

  /** Issues `count` ids in increasing order, synchronously (generator.nextIds()). */
  nextIds(count: number): bigint[] {
    return this.generator.nextIds(count);
  }

  nextIdsAsync(count: number, chunk?: number): Promise<bigint[]> {
    return this.generator.nextIdsAsync(count, chunk);
  }

  private acquire(): Promise<WorkerLease> {
    return this.options.registry.acquire({
      node: this.options.node,
      maxWorkerId: this.layout.maxWorkerId,
      backups: this.options.backups ?? 0,
      ...(this.options.workerId !== undefined ? { workerId: this.options.workerId } : {}),
      signal: this.closing.signal,
    });
  }

  /**
   * The earliest instant (ms) ids may carry under a worker id whose stored timestamp is `stored`.
   * The stored timestamp is the last report, and the previous holder may have issued ids until its
   * next report was due, a report period later (it may have crashed just before it): ids start
   * after that, whatever the clock says now, so a restart with the clock stepped back by less than
   * a period cannot repeat them. 0 (never used) stays 0.
   */
  private issueFloor(stored: number): number {
    if (stored <= 0) return stored;
    return (
      stored + (this.options.reportIntervalMs ?? 3000) + (this.options.restartMarginMs ?? 1000)
    );
  }

  /**
   * What the generator watches of `lease`: its `fenceAt`, and its `horizon` when it has one. A
   * lease without one holds a fixed id (ZooKeeper normal mode, MySQL fixed mode): its next holder
   * is this node restarting, which starts after the issue floor of the stored timestamp, so nothing
   * may be timestamped past the floor of the last timestamp the store confirmed. With reports every
   * period and stored within the restart margin, that limit stays about the margin ahead of the
   * clock; a report that takes longer, or a store that is unreachable, stops ids until a report
   * lands.
   */
  private deadline(lease: WorkerLease): LeaseDeadline {
    const fixedHorizon = () => {
      const own = this.lease === lease ? this.reportedConfirmed : 0;
      const confirmed = Math.max(lease.lastTimestamp, lease.confirmedTimestamp ?? 0, own);
      // Never used and not yet reported: the next holder may start at any time, so nothing yet.
      return confirmed > 0 ? this.issueFloor(confirmed) : 0;
    };
    return {
      get fenceAt() {
        return lease.fenceAt;
      },
      get horizon() {
        const live = lease.horizon;
        if (live === undefined) return fixedHorizon();
        // A horizon its next holder does not wait out bounds nothing past where that holder starts.
        return lease.successorStartsFromConfirmed ? Math.min(live, fixedHorizon()) : live;
      },
    };
  }

  /**
   * A lease without a horizon (or whose next holder starts from its confirmed timestamp): reports
   * the clock once before ids flow (after the start's wait the clock is at the issue floor of the
   * stored timestamp, which is where its limit would be; see {@link deadline}), so the limit starts
   * a period + margin ahead. A failure is left to the periodic reports (no id until one lands).
   */
  private async confirmFirst(lease: WorkerLease): Promise<void> {
    this.reportedConfirmed = 0;
    if (lease.horizon !== undefined && !lease.successorStartsFromConfirmed) return;
    const now = this.clock.now();
    const stored = lease.report(now).then(
      () => true,
      () => false,
    );
    // Already confirmed by the call (a cache file the restart reads, written at once): ids need
    // not wait for the store, which may be down; the lease queues the release behind this report.
    if ((lease.confirmedTimestamp ?? 0) >= now) return;
    if (await stored) this.reportedConfirmed = Math.max(this.reportedConfirmed, now);
  }

  /** The lease's timestamps as the generator's floors (see {@link issueFloor}). */
  private floors(lease: WorkerLease): { lastTimestamp: number; backups: BackupWorker[] } {
    return {
      lastTimestamp: this.issueFloor(lease.lastTimestamp),
      backups: lease.backups.map((b) => ({
        workerId: b.workerId,
        lastTimestamp: this.issueFloor(b.lastTimestamp),
      })),
    };
  }

  /**
   * Refuses a lease whose stored timestamp is ahead of the clock past tolerance
   * (CLOCK_BEHIND_LEASE, both times in the message). Otherwise waits until the clock passes the
   * issue floor: at most the report period + the restart margin + the tolerance. The generator
   * enforces the floor itself (it is its last timestamp), so a clock that moves back during the
   * wait is still safe.
   */
  private async admit(lease: WorkerLease): Promise<void> {
    const tolerance =
      this.options.startToleranceMs ?? this.options.generator?.rollbackToleranceMs ?? 5;
    const now = this.clock.now();
    checkClockNotBehind({
      component: COMPONENT,
      lastTimestamp: lease.lastTimestamp,
      now,
      toleranceMs: tolerance,
      source: `the ${this.options.registry.kind} registry`,
      workerId: lease.workerId,
    });
    const wait = this.issueFloor(lease.lastTimestamp) - now;
    // Short waits block (as the generator's own rollback wait); long ones yield the event loop.
    if (wait > 0 && wait <= 50) this.clock.sleepSync(wait + 1);
    else if (wait > 0) await delay(wait + 1, this.closing.signal);
  }

  private hold(lease: WorkerLease): void {
    this.lease = lease;
    this.phase = "held";
    this.options.onEvent?.({
      type: "lease-acquired",
      workerId: lease.workerId,
      lastTimestamp: lease.lastTimestamp,
      backups: lease.backups.map((b) => b.workerId),
    });
    const onLost = () => this.onLost(lease);
    if (lease.lost.aborted) {
      onLost();
      return;
    }
    lease.lost.addEventListener("abort", onLost, { once: true });
    const firstDelay = this.options.firstReportDelayMs ?? 1000;
    // A lease bounded by its reports reported at start: the next report is due a period later at most.
    this.schedule(
      lease.horizon === undefined || lease.successorStartsFromConfirmed
        ? Math.min(firstDelay, this.options.reportIntervalMs ?? 3000)
        : firstDelay,
    );
  }

  private schedule(ms: number): void {
    clearTimeout(this.timer);
    // Every period, also while a report is slow (the lease joins a report that is still queued):
    // a lease without a horizon may issue only a period + margin past its last stored report.
    this.timer = setTimeout(() => {
      if (this.phase === "held") this.schedule(this.options.reportIntervalMs ?? 3000);
      const reporting = this.report().finally(() => {
        if (this.reporting === reporting) this.reporting = undefined;
      });
      this.reporting = reporting;
    }, ms);
    this.timer.unref();
  }

  /** The timestamp to report: the later of the clock and the last id issued (never backwards). */
  private reportValues() {
    const stamps = this.generator.timestamps();
    const now = this.clock.now();
    const primary = Math.max(stamps.primary.lastTimestamp, now);
    return { primary, backups: stamps.backups };
  }

  private async report(): Promise<void> {
    const lease = this.lease;
    if (!lease || this.phase !== "held") return;
    const { primary, backups } = this.reportValues();
    try {
      await lease.report(primary, backups);
      if (this.lease === lease) {
        this.reportedConfirmed = Math.max(this.reportedConfirmed, primary);
      }
      this.lastReportAt = this.clock.now();
      this.options.onEvent?.({ type: "reported", workerId: lease.workerId, timestamp: primary });
    } catch (error) {
      this.options.onEvent?.({ type: "report-failed", workerId: lease.workerId, error });
    }
  }

  private onLost(lease: WorkerLease): void {
    if (this.lease !== lease || this.phase === "closed") return;
    const reason = isLeafError(lease.lost.reason)
      ? lease.lost.reason
      : leaseLostError({
          component: COMPONENT,
          workerId: lease.workerId,
          why: `the ${this.options.registry.kind} registry aborted it`,
          cause: lease.lost.reason,
        });
    this.generator.fence(reason);
    this.phase = "fenced";
    this.lease = undefined;
    clearTimeout(this.timer);
    this.options.onEvent?.({ type: "lease-lost", workerId: lease.workerId, error: reason });
    if (this.options.reacquire ?? true) void this.reacquire();
  }

  private async reacquire(): Promise<void> {
    for (let attempt = 0; !this.closing.signal.aborted; attempt++) {
      try {
        const lease = await this.acquire();
        try {
          await this.admit(lease);
        } catch (error) {
          await lease.release().catch(() => {});
          throw error;
        }
        if (this.closing.signal.aborted) {
          await lease.release().catch(() => {});
          return;
        }
        await this.confirmFirst(lease);
        this.generator.setLease(
          { ...this.floors(lease), workerId: lease.workerId },
          this.deadline(lease),
        );
        this.hold(lease);
        return;
      } catch (error) {
        if (this.closing.signal.aborted) return;
        this.options.onEvent?.({ type: "reacquire-failed", attempt, error });
        await delay(
          backoffDelay(attempt, { initialMs: 200, maxMs: 5000 }),
          this.closing.signal,
        ).catch(() => {});
      }
    }
  }

  /**
   * Fences the generator first (no id from here on), then takes the final timestamp, which
   * therefore covers every id issued, and releases the lease with it. The release is not held back
   * for a report in flight: the lease runs it after that report (WorkerLease.release), and may end
   * a report still waiting for an unreachable store once released (the stop stays prompt).
   */
  async close(): Promise<void> {
    if (this.phase === "closed") return;
    // A start in flight ends first, so that the lease it takes is released here, not leaked. A
    // started worker is fenced at once, before anything is awaited.
    if (!this.built && this.starting) {
      await this.starting.catch(() => {});
      if ((this.phase as SnowflakeWorkerState) === "closed") return;
    }
    const lease = this.lease;
    const closed = this.closedError();
    this.built?.fence(closed);
    this.phase = "closed";
    this.closing.abort(closed);
    clearTimeout(this.timer);
    const reporting = this.reporting;
    const finalValues = this.built ? this.reportValues() : undefined;
    if (lease && !lease.lost.aborted) {
      const backupsReport =
        finalValues && finalValues.backups.length > 0
          ? lease.report(finalValues.primary, finalValues.backups).catch(() => {})
          : undefined;
      await lease.release(finalValues?.primary);
      await backupsReport;
    }
    await reporting;
  }

  private closedError(): LeafError {
    return new LeafError({
      component: COMPONENT,
      code: ErrorCodes.CLOSED,
      message: "snowflake worker closed",
    });
  }
}
