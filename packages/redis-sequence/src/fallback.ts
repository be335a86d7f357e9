// What a sequence does while Redis cannot be reached: it remembers since when and why, waits a
// growing backoff between tries, and with whenRedisDown "random" hands out random sequences kept
// out of the ranges Redis granted for the same second.
import { backoffDelay, ErrorCodes, isLeafError, type LeafError } from "@leaf/core";
import type { SequenceErrors } from "./errors";
import type { IdBits } from "./id-bits";
import type { ResolvedOptions } from "./options";
import type { Slot } from "./slot-cache";
import type { SequenceStats } from "./state";

const COMPONENT = "redis-sequence";

/** Redis unreachable: since when, the last failure, and when to try again. */
export interface DownState {
  /** When Redis became unreachable (ms since the Unix epoch). */
  sinceMs: number;
  attempts: number;
  /** performance.now() before which no round trip is tried. */
  retryAt: number;
  error: LeafError;
  randomWarned: boolean;
}

/** Whether Redis answers, and the random fallback while it does not. */
export class Fallback {
  private state: DownState | undefined;
  private randomSecond = -1;
  private readonly randomUsed = new Set<bigint>();

  constructor(
    private readonly o: ResolvedOptions,
    /** Where Redis is, without passwords. */
    private readonly where: string,
    private readonly stats: SequenceStats,
    private readonly errors: SequenceErrors,
    private readonly bits: IdBits,
  ) {}

  /** Since when and why Redis is unreachable; undefined while it answers. */
  get down(): Readonly<DownState> | undefined {
    return this.state;
  }

  /** Redis answered. */
  reachable(): void {
    this.state = undefined;
  }

  /** A round trip failed with `error`: warns on the first failure, and backs off. */
  markDown(error: LeafError): void {
    this.stats.failures++;
    if (!this.state) {
      this.state = {
        sinceMs: Date.now(),
        attempts: 0,
        retryAt: 0,
        error,
        randomWarned: false,
      };
      this.o.onWarning({
        type: "redis-unavailable",
        message: error.message,
        details: { namespace: this.o.namespace, redis: this.where },
      });
    }
    this.state.error = error;
    this.state.retryAt =
      performance.now() + backoffDelay(this.state.attempts++, { initialMs: 100, maxMs: 2000 });
  }

  /** True while the backoff after a failure runs: no round trip is tried meanwhile. */
  backingOff(): boolean {
    return this.state !== undefined && performance.now() < this.state.retryAt;
  }

  /**
   * While backing off: a random id when that is allowed, else the error that says Redis is still
   * down and when the next try is.
   */
  whileDown(slot: Slot, shard: number, second: number): bigint {
    const down = this.state!;
    return this.randomOr(down.error, slot, shard, second, () =>
      this.errors.stillDown(down.sinceMs, down.retryAt - performance.now(), down.error),
    );
  }

  /**
   * A random id for `shard` in `second` when whenRedisDown is "random" and `error` says Redis is
   * unreachable; otherwise throws `error` (or what `otherwise` builds).
   */
  randomOr(
    error: unknown,
    slot: Slot,
    shard: number,
    second: number,
    otherwise: () => unknown = () => error,
  ): bigint {
    if (this.o.whenRedisDown === "random" && isLeafError(error, ErrorCodes.UNAVAILABLE)) {
      return this.randomId(slot, shard, second);
    }
    throw otherwise();
  }

  private randomId(slot: Slot, shard: number, second: number): bigint {
    if (this.state && !this.state.randomWarned) {
      this.state.randomWarned = true;
      this.o.onWarning({
        type: "random-fallback",
        message:
          `[leaf] [${COMPONENT}] Redis at ${this.where} is unreachable and no range is ` +
          `cached: handing out RANDOM sequences (whenRedisDown "random") in namespace ` +
          `${this.o.namespace}. They are unique within this process only: another process, or a ` +
          "range Redis hands out in the same second, may produce the same id",
        details: { namespace: this.o.namespace },
      });
    }
    if (second !== this.randomSecond) {
      this.randomSecond = second;
      this.randomUsed.clear();
    }
    const grants = slot.second === second ? slot.grants : [];
    const maxSequence = this.o.layout.maxSequence;
    for (let attempt = 0; attempt < 64; attempt++) {
      const sequence = Math.floor(this.o.random() * (maxSequence + 1));
      if (grants.some((g) => sequence >= g.first && sequence <= g.last)) continue;
      const id = this.bits.compose(second, shard, sequence);
      if (this.randomUsed.has(id)) continue;
      this.randomUsed.add(id);
      this.stats.randomIds++;
      return id;
    }
    throw this.errors.exhausted(second);
  }
}
