// The clock every generator and registry reads: wall-clock milliseconds, plus a synchronous sleep
// so that a short wait (a clock that moved back by a few ms) can be done without an event-loop
// turn. Tests pass a ManualClock to move time, including backwards, on demand.

/** A source of wall-clock time. */
export interface Clock {
  /** Milliseconds since the Unix epoch (may move backwards: that is what the generators guard). */
  now(): number;
  /** Blocks the calling thread for `ms` milliseconds. Used only for waits of a few milliseconds. */
  sleepSync(ms: number): void;
}

const sleepCell = new Int32Array(new SharedArrayBuffer(4));

/** The system clock: `Date.now()`, and a blocking sleep through `Atomics.wait`. */
export const systemClock: Clock = {
  now: () => Date.now(),
  sleepSync(ms: number) {
    if (ms > 0) Atomics.wait(sleepCell, 0, 0, ms);
  },
};

/**
 * A clock that moves only when told to. `sleepSync` advances it by the time slept, and
 * `onSleep` lets a test move it differently (for example backwards during a wait).
 */
export class ManualClock implements Clock {
  private current: number;
  /** Called on every sleepSync with the requested duration; replaces the default advance. */
  onSleep: ((ms: number, clock: ManualClock) => void) | undefined;
  /** Called on every now(); lets a test script a sequence of readings. */
  onNow: ((clock: ManualClock) => void) | undefined;

  constructor(startMs: number = Date.UTC(2026, 0, 1)) {
    this.current = startMs;
  }

  now(): number {
    this.onNow?.(this);
    return this.current;
  }

  sleepSync(ms: number): void {
    if (this.onSleep) this.onSleep(ms, this);
    else this.current += ms;
  }

  /** Sets the time, forwards or backwards. */
  set(ms: number): void {
    this.current = ms;
  }

  /** Moves the time by `ms` (negative moves it back). */
  advance(ms: number): void {
    this.current += ms;
  }
}
