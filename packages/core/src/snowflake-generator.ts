// The snowflake generator for one worker id: time | worker | sequence, with Leaf's random sequence
// start, clock-rollback handling (wait within tolerance, backup worker ids beyond it, else refuse),
// bounded waits, refusal past the layout's last instant, and fencing when the lease is lost.
// One class: the id paths (one, a batch, a number) share the clock state, the backup ids and the
// fence, and must be read together to see that no id repeats.
import { type Clock, systemClock } from "./clock";
import { argumentError, ErrorCodes, LeafCodes, LeafError } from "./errors";
import { type DecodedId, type Layout, layouts } from "./layout";
import { leaseLostError } from "./lease-core";
import type { BackupWorker } from "./registry";
import { numberLayoutError } from "./safe-number";

const COMPONENT = "core";
const YEAR_MS = 365 * 24 * 3600 * 1000;
/** Clock reads in a busy wait before falling back to a sleep (a stuck or manual clock). */
const MAX_SPINS = 100_000;

/** A warning the generator raises for the caller's logger. */
export interface GeneratorWarning {
  type: "layout-expiry";
  message: string;
  /** Time left until the layout's last instant, in ms. */
  remainingMs: number;
  lastInstantMs: number;
}

/** A clock-rollback event, for metrics and logs. */
export interface ClockRollbackEvent {
  /** How far the clock was behind the last issued timestamp, in ms. */
  offsetMs: number;
  /** What the generator did: waited it out, moved to a backup worker id, or refused. */
  action: "waited" | "backup" | "refused";
  workerId: number;
}

/** Options of {@link SnowflakeGenerator}. */
export interface SnowflakeOptions {
  /** Worker id, 0 .. layout.maxWorkerId. */
  workerId: number;
  /** Bit layout (default: Leaf's 41/10/12 ms layout, epoch 1288834974657). */
  layout?: Layout;
  /** Clock (default: the system clock). */
  clock?: Clock;
  /**
   * Highest timestamp (ms) ever issued under this worker id, from the registry's lease: the first
   * id is issued strictly after it (default 0).
   */
  lastTimestamp?: number;
  /**
   * Backup worker ids for clock rollback, used in order when the clock moves back past the
   * tolerance.
   */
  backups?: readonly BackupWorker[];
  /** Clock rollback that is waited out, in ms (default 5, as Leaf). */
  rollbackToleranceMs?: number;
  /**
   * Each new tick starts its sequence at a random value in [0, n) (Leaf: 100), which spreads ids
   * over modulo-sharded tables. 0 starts every tick at 0.
   */
  randomSequenceStart?: number;
  /** Random source in [0, 1) (default Math.random). */
  random?: () => number;
  /** Warn when less than this is left before the layout's last instant (default 1 year). */
  expiryWarningMs?: number;
  /** Receives warnings (default: process.emitWarning). */
  onWarning?: (warning: GeneratorWarning) => void;
  /** Receives clock-rollback events. */
  onClockRollback?: (event: ClockRollbackEvent) => void;
  /**
   * The lease ids are issued under: its `fenceAt` deadline and its `horizon`, when set, are
   * honoured (see WorkerLease).
   */
  lease?: LeaseDeadline;
}

/**
 * The part of a lease the generator watches: a deadline on this node's monotonic clock, and the
 * latest timestamp the store confirmed on its wall clock.
 */
export interface LeaseDeadline {
  /** `performance.now()` ms after which no id may be issued until a renewal moves it. */
  readonly fenceAt?: number;
  /**
   * ms since the Unix epoch: no id is timestamped past it (the next holder starts after it) until a
   * renewal stores a later one.
   */
  readonly horizon?: number;
}

/** What the generator last issued, per worker id, for timestamp reports. */
export interface GeneratorTimestamps {
  /** The worker id ids are issued under now (the primary or a backup). */
  activeWorkerId: number;
  /** Primary worker id and the highest timestamp (ms) issued under it. */
  primary: BackupWorker;
  backups: BackupWorker[];
}

/** State of a generator. */
export type GeneratorState = "active" | "fenced";

/**
 * Generates ids for one worker id. Synchronous: `nextId()` reads the clock and returns a bigint;
 * it blocks only to wait for the next tick when a tick's sequence is used up, or for a clock that
 * moved back by less than the tolerance.
 */
export class SnowflakeGenerator {
  readonly layout: Layout;
  /** The clock the generator reads. */
  readonly clock: Clock;
  private readonly toleranceMs: number;
  private readonly randomStart: number;
  private readonly random: () => number;
  private readonly onWarning: (warning: GeneratorWarning) => void;
  private readonly onClockRollback: ((event: ClockRollbackEvent) => void) | undefined;
  private readonly expiryWarningMs: number;
  private readonly epoch: number;
  private readonly unit: number;
  private readonly maxSequence: number;
  private readonly timestampShift: bigint;
  private readonly workerShift: bigint;

  private workerId = 0;
  private primaryWorkerId = 0;
  /** Last tick issued per worker id (primary and backups). */
  private readonly lastTicks = new Map<number, number>();
  private backupOrder: number[] = [];
  private lastTick = -1;
  private sequence = 0;
  /** The last id issued (valid while lastTick is current). */
  private current = 0n;
  private fencedBy: LeafError | undefined;
  private leaseDeadline: LeaseDeadline | undefined;
  private nextExpiryCheck = 0;

  constructor(options: SnowflakeOptions) {
    this.layout = options.layout ?? layouts.leaf;
    this.clock = options.clock ?? systemClock;
    this.toleranceMs = nonNegative("rollbackToleranceMs", options.rollbackToleranceMs ?? 5);
    this.randomStart = nonNegative(
      "randomSequenceStart",
      options.randomSequenceStart ?? Math.min(100, this.layout.maxSequence + 1),
    );
    if (this.randomStart > this.layout.maxSequence + 1) {
      throw argumentError(
        COMPONENT,
        "randomSequenceStart",
        this.randomStart,
        `at most ${this.layout.maxSequence + 1} (the layout's sequence space)`,
      );
    }
    this.random = options.random ?? Math.random;
    this.expiryWarningMs = nonNegative("expiryWarningMs", options.expiryWarningMs ?? YEAR_MS);
    this.onWarning = options.onWarning ?? defaultWarning;
    this.onClockRollback = options.onClockRollback;
    this.epoch = this.layout.epoch;
    this.unit = this.layout.unitMillis;
    this.maxSequence = this.layout.maxSequence;
    this.timestampShift = BigInt(this.layout.timestampShift);
    this.workerShift = BigInt(this.layout.workerShift);
    this.setLease({
      workerId: options.workerId,
      lastTimestamp: options.lastTimestamp ?? 0,
      backups: options.backups ?? [],
      fenceAt: undefined,
    });
    this.leaseDeadline = options.lease;
  }

  /** The worker id ids are issued under now (the primary, or a backup after a clock rollback). */
  get activeWorkerId(): number {
    return this.workerId;
  }

  /** "fenced" after {@link fence} until {@link setLease}. */
  get state(): GeneratorState {
    return this.fencedBy ? "fenced" : "active";
  }

  /**
   * Starts issuing under a (new) lease: worker id, the highest timestamp stored for it, backups.
   * The first id under each worker id comes strictly after its stored timestamp. Lifts a fence.
   * `deadline` is read for `fenceAt` on every new tick (default: `lease` itself).
   */
  setLease(
    lease: {
      workerId: number;
      lastTimestamp: number;
      backups?: readonly BackupWorker[];
    } & LeaseDeadline,
    deadline: LeaseDeadline = lease,
  ) {
    const max = this.layout.maxWorkerId;
    const ids = [lease.workerId, ...(lease.backups ?? []).map((b) => b.workerId)];
    for (const id of ids) {
      if (!Number.isInteger(id) || id < 0 || id > max) {
        throw argumentError(
          COMPONENT,
          "workerId",
          id,
          `an integer from 0 to ${max} (layout ${this.layout.name})`,
        );
      }
    }
    if (new Set(ids).size !== ids.length) {
      throw argumentError(COMPONENT, "backups", ids, "worker ids distinct from each other");
    }
    this.syncActive();
    const known = new Map(this.lastTicks);
    this.lastTicks.clear();
    const floorTick = (workerId: number, lastTimestamp: number) => {
      if (!Number.isSafeInteger(lastTimestamp) || lastTimestamp < 0) {
        throw argumentError(COMPONENT, "lastTimestamp", lastTimestamp, "ms since the Unix epoch");
      }
      const stored = lastTimestamp > 0 ? this.layout.ticksAt(lastTimestamp) : -1;
      this.lastTicks.set(workerId, Math.max(stored, known.get(workerId) ?? -1));
    };
    floorTick(lease.workerId, lease.lastTimestamp);
    for (const backup of lease.backups ?? []) floorTick(backup.workerId, backup.lastTimestamp);
    this.primaryWorkerId = lease.workerId;
    this.backupOrder = (lease.backups ?? []).map((b) => b.workerId);
    this.activate(lease.workerId);
    this.fencedBy = undefined;
    this.leaseDeadline = deadline;
    this.nextExpiryCheck = 0;
  }

  /** Refuses every id from now on with `reason` (LEASE_LOST, Leaf code -4) until setLease. */
  fence(reason?: LeafError): void {
    this.fencedBy =
      reason ??
      leaseLostError({
        component: COMPONENT,
        workerId: this.primaryWorkerId,
        why: "the generator is fenced",
        advice: "no ids until a new lease arrives",
      });
  }

  /** Issues one id. Throws a LeafError when it cannot issue one safely. */
  nextId(): bigint {
    if (this.fencedBy) throw this.fencedBy;
    const now = this.clock.now();
    const tick = Math.floor((now - this.epoch) / this.unit);
    if (tick === this.lastTick && this.sequence < this.maxSequence) {
      this.sequence++;
      this.current += 1n;
      return this.current;
    }
    return this.nextIdSlow(now, tick);
  }

  /**
   * Issues one id as a JS number (exact: every id of the layout is at most 2^53 - 1). Only for a
   * layout that fits 53 bits (`layout.fitsNumber`: `layouts.safe53ms`, `layouts.safe53s`, or your
   * own); with any other it throws INVALID_LAYOUT saying why, before taking an id. It is refused at
   * the call rather than at construction because the same generator serves bigint ids with any
   * layout. Other errors as {@link nextId}.
   */
  nextNumber(): number {
    if (!this.layout.fitsNumber) throw numberLayoutError(COMPONENT, this.layout);
    return Number(this.nextId());
  }

  /**
   * Issues `count` ids in increasing order. After the first id of a tick, the rest of that tick's
   * sequence is taken without reading the clock again (ids never run ahead of the clock). When the
   * clock moves back past the tolerance mid-batch and the generator moves to a backup worker id,
   * the later ids may be smaller than the earlier ones: the batch is then sorted, so it is
   * increasing all the same. Synchronous: for large batches on a server, use {@link nextIdsAsync}.
   */
  nextIds(count: number): bigint[] {
    checkCount(count);
    const out: bigint[] = new Array(count);
    if (this.fill(out, 0, count)) sortIds(out);
    return out;
  }

  /**
   * {@link nextIds}, generated in chunks of at most `chunk` ids (default: one tick's sequence
   * space) with a turn of the event loop between them, so that lease renewals and fencing timers
   * run during a large batch. Other callers may take ids between chunks: the batch is increasing,
   * not consecutive. Rejects with the generator's error when a chunk cannot be issued (fenced,
   * lease ran out): the ids made before are dropped, never reissued.
   */
  async nextIdsAsync(count: number, chunk = this.maxSequence + 1): Promise<bigint[]> {
    checkCount(count);
    if (!Number.isInteger(chunk) || chunk < 1) {
      throw argumentError(COMPONENT, "chunk", chunk, "an integer of 1 or more");
    }
    const out: bigint[] = new Array(count);
    let unordered = false;
    for (let i = 0; i < count; i += chunk) {
      if (i > 0) await yieldToEventLoop();
      const end = Math.min(count, i + chunk);
      if (this.fill(out, i, end)) unordered = true;
      if (i > 0 && out[i]! <= out[i - 1]!) unordered = true;
    }
    if (unordered) sortIds(out);
    return out;
  }

  /** Writes ids into out[from, to); true when one of them is not above its predecessor. */
  private fill(out: bigint[], from: number, to: number): boolean {
    let i = from;
    let unordered = false;
    let previous = -1n;
    while (i < to) {
      let id = this.nextId();
      // Only a move to a backup worker id (a clock rollback) makes a tick start lower.
      if (id <= previous) unordered = true;
      out[i++] = id;
      let room = Math.min(this.maxSequence - this.sequence, to - i);
      this.sequence += room;
      while (room-- > 0) {
        id += 1n;
        out[i++] = id;
      }
      this.current = id;
      previous = id;
    }
    return unordered;
  }

  /** Takes an id apart with this generator's layout and epoch. */
  decode(id: bigint | string): DecodedId {
    return this.layout.decompose(id);
  }

  /** Highest timestamps issued per worker id, for the registry's periodic report. */
  timestamps(): GeneratorTimestamps {
    const at = (workerId: number): BackupWorker => {
      const tick = this.lastTicks.get(workerId) ?? -1;
      return { workerId, lastTimestamp: tick < 0 ? 0 : this.layout.msAt(tick) };
    };
    this.syncActive();
    return {
      activeWorkerId: this.workerId,
      primary: at(this.primaryWorkerId),
      backups: this.backupOrder.map(at),
    };
  }

  /** Writes the active worker's last tick into the per-worker map. */
  private syncActive(): void {
    if (this.lastTick < 0) return;
    const stored = this.lastTicks.get(this.workerId) ?? -1;
    this.lastTicks.set(this.workerId, Math.max(stored, this.lastTick));
  }

  private activate(workerId: number): void {
    this.syncActive();
    this.workerId = workerId;
    this.lastTick = this.lastTicks.get(workerId) ?? -1;
    // The stored tick may have been used up to any sequence by an earlier holder: never reuse it.
    this.sequence = this.maxSequence;
    this.current = 0n;
  }

  /**
   * Throws LEASE_LOST when the lease's `fenceAt` has passed. Called after the clock reading that
   * decides an id's tick, so a pause between that reading and this check (a wait for the next tick,
   * SIGSTOP, a blocked event loop) is caught. Not a sticky fence: a renewal that arrives late moves
   * fenceAt and ids resume.
   */
  private checkFence(): void {
    const fenceAt = this.leaseDeadline?.fenceAt;
    if (fenceAt !== undefined && performance.now() >= fenceAt) {
      throw new LeafError({
        component: COMPONENT,
        code: ErrorCodes.LEASE_LOST,
        leafCode: LeafCodes.LEASE_LOST,
        message: `worker id ${this.primaryWorkerId}: the lease ran out on this node's clock before a renewal arrived; no ids until it is renewed or replaced`,
      });
    }
  }

  /**
   * Throws LEASE_LOST when `tick` starts after the lease's `horizon`, the latest timestamp the
   * store confirmed: the next holder of the id starts after it, so an id past it could repeat one
   * of its (the wall clock stepped forward since the last renewal). Not sticky: a renewal that
   * stores a later horizon lifts it. A tick that starts at or before the horizon is whole below the
   * next holder's first tick, which is after the horizon's tick.
   */
  private checkHorizon(tick: number): void {
    const horizon = this.leaseDeadline?.horizon;
    if (horizon === undefined || tick <= Math.floor((horizon - this.epoch) / this.unit)) return;
    const at = this.layout.msAt(tick);
    throw new LeafError({
      component: COMPONENT,
      code: ErrorCodes.LEASE_LOST,
      leafCode: LeafCodes.LEASE_LOST,
      message:
        `worker id ${this.workerId}: the clock (${new Date(at).toISOString()}) is past the horizon ` +
        `the registry last confirmed for the lease (${new Date(horizon).toISOString()}), after which ` +
        "the next holder of the id may issue (the wall clock stepped forward since the last " +
        "renewal?); no ids until a renewal stores a later horizon",
      details: { workerId: this.workerId, timestampMs: at, horizonMs: horizon },
    });
  }

  /**
   * A new tick, or a tick after a wait. `fenceAt` and `horizon` are checked here and only here:
   * every tick starts in this method, after the clock reading that chose it, and the fast path in
   * {@link nextId} issues only within a tick checked here (its own clock reading is still in that
   * tick).
   */
  private nextIdSlow(now: number, tick: number): bigint {
    this.checkFence();
    for (;;) {
      if (tick < this.lastTick) {
        tick = this.handleRollback(now, tick);
        now = this.clock.now();
        continue;
      }
      if (tick === this.lastTick) {
        if (this.sequence < this.maxSequence) {
          // Reached after a rollback wait: the wait may have outlasted the lease.
          this.checkFence();
          this.sequence++;
          this.current += 1n;
          return this.current;
        }
        // Sequence used up: wait for the next tick (Leaf: tilNextMillis, but bounded).
        tick = this.waitForTick(this.lastTick + 1, this.unit * 2 + this.toleranceMs * 2 + 10);
        if (tick < 0) {
          now = this.clock.now();
          tick = this.layout.ticksAt(now);
          if (tick < this.lastTick) continue;
          throw new LeafError({
            component: COMPONENT,
            code: ErrorCodes.CLOCK_BEHIND,
            leafCode: LeafCodes.SNOWFLAKE_CLOCK_BEHIND,
            message: `the clock did not reach the next tick while waiting (worker id ${this.workerId}, last tick at ${new Date(this.layout.msAt(this.lastTick)).toISOString()}, clock at ${new Date(now).toISOString()})`,
            details: { now, workerId: this.workerId },
          });
        }
      }
      if (tick > this.layout.maxTicks) throw this.exhausted(now);
      if (now >= this.nextExpiryCheck) this.checkExpiry(now);
      // After the last clock reading of this call, which may have come after a wait.
      this.checkFence();
      this.checkHorizon(tick);
      this.lastTick = tick;
      this.sequence = this.randomStart > 1 ? Math.floor(this.random() * this.randomStart) : 0;
      this.current =
        (BigInt(tick) << this.timestampShift) |
        (BigInt(this.workerId) << this.workerShift) |
        BigInt(this.sequence);
      return this.current;
    }
  }

  /**
   * The clock is behind the last issued tick: wait, switch to a backup, or refuse. Returns a tick.
   */
  private handleRollback(now: number, tick: number): number {
    const offsetMs = this.layout.msAt(this.lastTick) - now;
    if (offsetMs <= this.toleranceMs) {
      // Leaf waits twice the offset and checks again.
      const reached = this.waitForTick(this.lastTick, offsetMs * 2 + this.unit);
      if (reached >= 0) {
        this.onClockRollback?.({ offsetMs, action: "waited", workerId: this.workerId });
        return reached;
      }
      const after = this.clock.now();
      if (this.layout.msAt(this.lastTick) - after <= this.toleranceMs) {
        this.onClockRollback?.({ offsetMs, action: "refused", workerId: this.workerId });
        throw new LeafError({
          component: COMPONENT,
          code: ErrorCodes.CLOCK_BEHIND,
          leafCode: LeafCodes.SNOWFLAKE_CLOCK_BEHIND,
          message: `clock still behind the last issued timestamp after waiting ${offsetMs * 2} ms (worker id ${this.workerId})`,
          details: { offsetMs, workerId: this.workerId },
        });
      }
      return this.handleRollback(after, this.layout.ticksAt(after));
    }
    for (const backup of this.backupOrder.concat(this.primaryWorkerId)) {
      if (backup === this.workerId) continue;
      const last = this.lastTicks.get(backup) ?? -1;
      if (last < tick) {
        this.onClockRollback?.({ offsetMs, action: "backup", workerId: backup });
        this.activate(backup);
        return tick;
      }
    }
    this.onClockRollback?.({ offsetMs, action: "refused", workerId: this.workerId });
    throw new LeafError({
      component: COMPONENT,
      code: ErrorCodes.CLOCK_MOVED_BACKWARDS,
      leafCode: LeafCodes.SNOWFLAKE_CLOCK_MOVED_BACKWARDS,
      message:
        `clock moved backwards by ${offsetMs} ms (tolerance ${this.toleranceMs} ms) on worker id ` +
        `${this.workerId} and no backup worker id is usable: refusing ids until the clock passes ` +
        `${new Date(this.layout.msAt(this.lastTick)).toISOString()}`,
      details: { offsetMs, toleranceMs: this.toleranceMs, workerId: this.workerId },
    });
  }

  /**
   * Waits until the clock reaches tick `target`, at most `budgetMs` of sleeping. Returns the tick
   * reached, or -1 when the budget ran out or the clock moved back past the tolerance meanwhile
   * (PR #153 of Java Leaf: that wait must not loop forever).
   */
  private waitForTick(target: number, budgetMs: number): number {
    const targetMs = this.layout.msAt(target);
    let spins = 0;
    let slept = 0;
    for (;;) {
      const now = this.clock.now();
      const tick = Math.floor((now - this.epoch) / this.unit);
      if (tick >= target) return tick;
      if (tick < this.lastTick && this.layout.msAt(this.lastTick) - now > this.toleranceMs)
        return -1;
      const remaining = targetMs - now;
      if (remaining > 2 || ++spins > MAX_SPINS) {
        const step = Math.max(1, remaining > 2 ? remaining - 1 : 1);
        if (slept + step > budgetMs) return -1;
        this.clock.sleepSync(step);
        slept += step;
        spins = 0;
      }
    }
  }

  private exhausted(now: number): LeafError {
    return new LeafError({
      component: COMPONENT,
      code: ErrorCodes.LAYOUT_EXHAUSTED,
      message:
        `layout ${this.layout.name} cannot represent ${new Date(now).toISOString()}: its last instant ` +
        `was ${new Date(this.layout.lastInstantMs).toISOString()}. Move to a layout with a later epoch ` +
        "or more timestamp bits; no id is issued (never a wrapped or negative one)",
      details: { now, lastInstantMs: this.layout.lastInstantMs },
    });
  }

  private checkExpiry(now: number): void {
    // Checked at most once an hour: cheap, and soon enough for a warning given a year ahead.
    this.nextExpiryCheck = now + 3_600_000;
    const remainingMs = this.layout.lastInstantMs - now;
    if (remainingMs < this.expiryWarningMs) {
      const days = Math.floor(remainingMs / 86_400_000);
      this.onWarning({
        type: "layout-expiry",
        remainingMs,
        lastInstantMs: this.layout.lastInstantMs,
        message:
          `[leaf] [core] layout ${this.layout.name} runs out of time in ${days} days, on ` +
          `${new Date(this.layout.lastInstantMs).toISOString()}; after that no id can be issued. ` +
          "Plan a move to a layout with a later epoch",
      });
    }
  }
}

function checkCount(count: number): void {
  if (!Number.isInteger(count) || count < 1 || count > 10_000_000) {
    throw argumentError(COMPONENT, "count", count, "an integer from 1 to 10,000,000");
  }
}

/** Sorts bigint ids in place, ascending (Array.prototype.sort compares strings by default). */
function sortIds(ids: bigint[]): void {
  ids.sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
}

function yieldToEventLoop(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

function nonNegative(name: string, value: number): number {
  if (typeof value !== "number" || !Number.isFinite(value) || value < 0) {
    throw argumentError(COMPONENT, name, value, "a number of 0 or more");
  }
  return value;
}

function defaultWarning(warning: GeneratorWarning): void {
  process.emitWarning(warning.message, { code: "LEAF_LAYOUT_EXPIRY" });
}
