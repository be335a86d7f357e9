// A lease kept alive by renewals, whatever the store: the renewal schedule, the fence deadline
// (send time of the last confirmed renewal + lease - margin, on the holder's monotonic clock) and
// its timer, and the horizon the store last confirmed (on the holder's wall clock).
// A registry's lease extends RenewingLease and writes one renewal round trip and its release write.
import type { Clock } from "./clock";
import { configError, type LeafError } from "./errors";
import { LeaseCore, type LeaseGrant } from "./lease-core";
import { positiveMs } from "./ms-options";

/**
 * The lease timings a renewing registry takes, in ms (all optional: see {@link checkLeaseTimings}).
 */
export interface LeaseTimingOptions {
  /** How long a lease lasts without renewal, judged by the store's clock. */
  leaseMs?: number;
  /** How long before the lease can end the holder fences itself (default leaseMs / 5). */
  safetyMarginMs?: number;
  /** ms between renewals (default: the smaller of 3,000 and (leaseMs - safetyMarginMs) / 4). */
  renewIntervalMs?: number;
}

/** Checked lease timings, ms. */
export interface LeaseTimings {
  leaseMs: number;
  safetyMarginMs: number;
  renewIntervalMs: number;
}

/**
 * Checks a registry's `leaseMs`, `safetyMarginMs` and `renewIntervalMs` and fills their defaults:
 * `leaseMs` at least 500 (default `defaults.leaseMs`), the margin below it, the interval below
 * `leaseMs - safetyMarginMs` so a lease is renewed before it fences. Throws INVALID_CONFIG naming
 * the option, the value and what is expected.
 */
export function checkLeaseTimings(
  component: string,
  options: LeaseTimingOptions,
  defaults: { leaseMs: number },
): LeaseTimings {
  const leaseMs = positiveMs(component, "leaseMs", options.leaseMs ?? defaults.leaseMs);
  if (leaseMs < 500) throw configError(component, "leaseMs", leaseMs, "at least 500 ms");
  const safetyMarginMs = positiveMs(
    component,
    "safetyMarginMs",
    options.safetyMarginMs ?? Math.round(leaseMs / 5),
  );
  if (safetyMarginMs >= leaseMs) {
    throw configError(
      component,
      "safetyMarginMs",
      safetyMarginMs,
      `less than leaseMs (${leaseMs})`,
    );
  }
  const renewIntervalMs = positiveMs(
    component,
    "renewIntervalMs",
    options.renewIntervalMs ?? Math.min(3000, Math.floor((leaseMs - safetyMarginMs) / 4)),
  );
  if (renewIntervalMs >= leaseMs - safetyMarginMs) {
    throw configError(
      component,
      "renewIntervalMs",
      renewIntervalMs,
      `less than leaseMs - safetyMarginMs (${leaseMs - safetyMarginMs}), so a lease is renewed before it fences`,
    );
  }
  return { leaseMs, safetyMarginMs, renewIntervalMs };
}

/** How a {@link RenewingLease} renews and fences, ms. */
export interface RenewalSchedule extends LeaseTimings {
  /**
   * `performance.now()` when the request that granted the lease was sent: the first deadline is
   * `sentAt + leaseMs - safetyMarginMs`.
   */
  sentAt: number;
  /**
   * The wall clock a release without a final timestamp reads: every held id is raised to its now
   * before {@link RenewingLease.releaseOnce}, since ids may have been issued up to the release.
   * Omit it when the store records the release time itself (etcd's horizon): the timestamps then
   * stay as reported.
   */
  clock?: Clock;
  /**
   * The horizon the grant stored for every held id (ms since the Unix epoch, the holder's wall
   * clock): the next holder starts after it. Omit it when the store keeps none. See
   * WorkerLease.horizon.
   */
  horizon?: number;
}

/**
 * What a renewal round trip may tell: the lease length the store applied, when not `leaseMs`, and
 * the horizon it stored.
 */
export interface RenewalConfirmed {
  /** The lease length (ms) the store applied from this renewal on (etcd's TTL, for one). */
  leaseMs?: number;
  /**
   * The horizon (ms since the Unix epoch) the store now holds for every held id: the lease's
   * {@link RenewingLease.horizon} rises to it (never falls).
   */
  horizon?: number;
}

/** What {@link RenewingLease.fenced} says when the deadline passes without a confirmed renewal. */
export interface FenceReason {
  /** The `why` of the LEASE_LOST error. */
  why: string;
  details?: Record<string, unknown>;
}

/**
 * A {@link LeaseCore} that renews itself. It owns:
 * - a renewal every `renewIntervalMs`, run in the lease's queue ({@link renew}; a failed one is
 *   retried by the next, and stays the cause of the fence);
 * - the deadline ({@link liveFenceAt}): the send time of the last confirmed renewal + the lease
 *   length - `safetyMarginMs`, on `performance.now()`. The store ends the lease no earlier than the
 *   lease length after it received that renewal, which is after it was sent, so the holder stops
 *   first; the margin covers clock-rate differences and a late timer;
 * - the fence timer: at the deadline the lease is lost with the adapter's {@link fenced} reason;
 * - stopping both timers on release, on loss and on {@link abandon};
 * - the horizon ({@link liveHorizon}): the grant's, raised by every confirmed renewal that tells
 *   one; the generator issues nothing timestamped past it (see WorkerLease.horizon);
 * - `store` (a report) as a renewal at once, which writes the reported timestamps;
 * - `free` (the release) skipped once lost, else the held ids raised to the clock's now when no
 *   final timestamp was given (see {@link RenewalSchedule.clock}), then {@link releaseOnce}.
 * The adapter writes {@link renewOnce} (one round trip, resolving only once the store confirmed
 * every held id), {@link releaseOnce} and {@link fenced}; a store that writes reports apart
 * overrides `store`.
 */
export abstract class RenewingLease extends LeaseCore {
  readonly #renewIntervalMs: number;
  readonly #safetyMarginMs: number;
  readonly #clock: Clock | undefined;
  #leaseMs: number;
  #renewedAt: number;
  #horizon: number | undefined;
  #lastRenewalError: unknown;
  #renewTimer: ReturnType<typeof setTimeout> | undefined;
  #fenceTimer: ReturnType<typeof setTimeout> | undefined;

  protected constructor(grant: LeaseGrant, schedule: RenewalSchedule) {
    super(grant);
    this.#leaseMs = schedule.leaseMs;
    this.#safetyMarginMs = schedule.safetyMarginMs;
    this.#renewIntervalMs = schedule.renewIntervalMs;
    this.#renewedAt = schedule.sentAt;
    this.#clock = schedule.clock;
    this.#horizon = schedule.horizon;
    this.#scheduleRenewal();
    this.#armFence();
  }

  /** `performance.now()` when the last renewal the store confirmed (or the grant) was sent. */
  get lastRenewedAt(): number {
    return this.#renewedAt;
  }

  /** The lease length (ms) in force: the configured one, or the last one the store applied. */
  protected get leaseMs(): number {
    return this.#leaseMs;
  }

  /** How long (ms) before the lease can end the holder fences itself. */
  protected get safetyMarginMs(): number {
    return this.#safetyMarginMs;
  }

  /**
   * When this lease fences itself unless a renewal is confirmed first, in `performance.now()` ms:
   * the send time of the last confirmed renewal + the lease length - the safety margin.
   */
  protected override liveFenceAt(): number {
    return this.#renewedAt + this.#leaseMs - this.#safetyMarginMs;
  }

  /** The horizon the store last confirmed for every held id (see WorkerLease.horizon). */
  protected override liveHorizon(): number | undefined {
    return this.#horizon;
  }

  /**
   * One renewal round trip for every held id. Resolves once the store confirmed it (with the lease
   * length it applied, when that is the store's to choose, and the horizon it stored); rejects
   * UNAVAILABLE when the store did not answer (the next renewal retries), or with {@link
   * LeaseCore.lose}'s reason when an id was taken away. Runs in the queue, never once lost.
   */
  protected abstract renewOnce(): Promise<RenewalConfirmed | undefined>;

  /**
   * The release write: frees every held id, recording its {@link LeaseCore.highest} timestamp
   * (`finalTimestampMs`, when given, is already in the primary's). Runs once, in the queue, never
   * once lost. Rejects UNAVAILABLE when the store cannot be reached: the ids then come back when
   * the lease ends.
   */
  protected abstract releaseOnce(finalTimestampMs: number | undefined): Promise<void>;

  /** The LEASE_LOST reason when the deadline passed: `silentMs` since the last confirmed send. */
  protected abstract fenced(silentMs: number): FenceReason;

  /**
   * Renews now (call it inside the queue, e.g. from `store`): fences instead when the deadline has
   * passed, else runs {@link renewOnce} and moves the deadline to its send time + lease - margin.
   */
  protected async renew(): Promise<void> {
    if (this.lost.aborted) throw this.lost.reason;
    if (performance.now() >= this.liveFenceAt()) throw this.#fence();
    const sentAt = performance.now();
    let confirmed: RenewalConfirmed | undefined;
    try {
      confirmed = await this.renewOnce();
    } catch (error) {
      if (!this.lost.aborted) this.#lastRenewalError = error;
      throw error;
    }
    if (this.lost.aborted) throw this.lost.reason;
    if (this.released) return;
    this.#renewedAt = Math.max(this.#renewedAt, sentAt);
    if (confirmed?.leaseMs !== undefined) this.#leaseMs = confirmed.leaseMs;
    if (confirmed?.horizon !== undefined) {
      this.#horizon = Math.max(this.#horizon ?? confirmed.horizon, confirmed.horizon);
    }
    this.#lastRenewalError = undefined;
    this.#armFence();
  }

  /** A report: renews at once, and the renewal writes the reported timestamps. */
  protected store(_reported: ReadonlyMap<number, number>): Promise<void> {
    return this.renew();
  }

  /**
   * The release: nothing once lost; else raises the held ids to now (without a final timestamp).
   */
  protected async free(finalTimestampMs: number | undefined): Promise<void> {
    if (this.lost.aborted) return;
    if (finalTimestampMs === undefined && this.#clock) {
      const now = this.#clock.now();
      for (const workerId of this.heldIds()) this.raise(workerId, now);
    }
    await this.releaseOnce(finalTimestampMs);
  }

  /**
   * Stops renewing and fencing once the release is under way (a bad final timestamp stops nothing).
   */
  override release(finalTimestampMs?: number): Promise<void> {
    const releasing = super.release(finalTimestampMs);
    if (this.released) this.#stopTimers();
    return releasing;
  }

  /** Ends the lease without releasing it (the registry is closing): it is lost from here on. */
  abandon(why: string): void {
    this.#stopTimers();
    if (!this.released) this.lose(why);
  }

  /** Stops the timers; an adapter overriding it calls `super.onLost(reason)`. */
  protected override onLost(_reason: LeafError): void {
    this.#stopTimers();
  }

  #scheduleRenewal(): void {
    clearTimeout(this.#renewTimer);
    this.#renewTimer = setTimeout(() => {
      this.serial(() => (this.released ? Promise.resolve() : this.renew()))
        .catch(() => {})
        .finally(() => {
          if (!this.lost.aborted && !this.released) this.#scheduleRenewal();
        });
    }, this.#renewIntervalMs);
    this.#renewTimer.unref?.();
  }

  #armFence(): void {
    clearTimeout(this.#fenceTimer);
    this.#fenceTimer = setTimeout(
      () => {
        if (this.lost.aborted || this.released) return;
        if (performance.now() >= this.liveFenceAt()) this.#fence();
        else this.#armFence();
      },
      Math.max(0, this.liveFenceAt() - performance.now()),
    );
    this.#fenceTimer.unref?.();
  }

  #fence(): LeafError {
    const { why, details } = this.fenced(Math.round(performance.now() - this.#renewedAt));
    return this.lose(why, { details, cause: this.#lastRenewalError });
  }

  #stopTimers(): void {
    clearTimeout(this.#renewTimer);
    clearTimeout(this.#fenceTimer);
    this.#renewTimer = undefined;
    this.#fenceTimer = undefined;
  }
}
