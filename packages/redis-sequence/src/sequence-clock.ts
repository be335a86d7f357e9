// The time a sequence numbers its seconds by: the local clock, or with timeSource "redis" the
// local clock plus the offset to Redis TIME measured on each round trip.
import type { Clock } from "@leaf/core";

/** The clock of one sequence, and the offset to Redis TIME it last measured. */
export class SequenceClock {
  /** Redis TIME minus the local clock, in ms, from the last round trip; undefined before one. */
  observedOffsetMs: number | undefined;
  private offsetMs = 0;

  constructor(
    private readonly clock: Clock,
    /** True with timeSource "redis": the measured offset moves this clock. */
    private readonly redisTime: boolean,
  ) {}

  /** Now in ms since the Unix epoch, by the configured time source. */
  nowMs(): number {
    return this.clock.now() + (this.redisTime ? this.offsetMs : 0);
  }

  /** The current second (Unix seconds), by the configured time source. */
  currentSecond(): number {
    return Math.floor(this.nowMs() / 1000);
  }

  /** Notes Redis TIME (`redisMs`) from an answer to a call sent at local time `sentAt`. */
  observe(redisMs: number, sentAt: number): void {
    const receivedAt = this.clock.now();
    const offset = Math.round(redisMs - (sentAt + receivedAt) / 2);
    this.observedOffsetMs = offset;
    if (this.redisTime) this.offsetMs = offset;
  }
}
