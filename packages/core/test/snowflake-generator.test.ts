import { describe, expect, it, vi } from "vitest";
import {
  defineLayout,
  ErrorCodes,
  isLeafError,
  LeafError,
  layouts,
  ManualClock,
  SnowflakeGenerator,
} from "../src/index";

const T0 = Date.UTC(2026, 0, 1);

function generator(
  clock: ManualClock,
  extra: Partial<ConstructorParameters<typeof SnowflakeGenerator>[0]> = {},
) {
  return new SnowflakeGenerator({ workerId: 7, clock, ...extra });
}

/** What `fn` throws (undefined when it returns). */
function errorOf(fn: () => unknown): unknown {
  try {
    fn();
  } catch (error) {
    return error;
  }
  return undefined;
}

function codeOf(fn: () => unknown): string | undefined {
  const error = errorOf(fn);
  if (error === undefined) return undefined;
  return isLeafError(error) ? error.code : String(error);
}

describe("SnowflakeGenerator", () => {
  it("starts each tick's sequence at a random value below 100, as Leaf", () => {
    const clock = new ManualClock(T0);
    const g = generator(clock);
    const starts = new Set<number>();
    for (let i = 0; i < 300; i++) {
      clock.advance(1);
      const { sequence, workerId, timestampMs } = g.decode(g.nextId());
      expect(sequence).toBeLessThan(100);
      expect(workerId).toBe(7);
      expect(timestampMs).toBe(clock.now());
      starts.add(sequence);
    }
    expect(starts.size).toBeGreaterThan(20);
  });

  it("starts every tick at 0 when the random start is switched off", () => {
    const clock = new ManualClock(T0);
    const g = generator(clock, { randomSequenceStart: 0 });
    clock.advance(1);
    expect(g.decode(g.nextId()).sequence).toBe(0);
    expect(g.decode(g.nextId()).sequence).toBe(1);
  });

  it("waits for the next tick when a tick's sequence is used up", () => {
    const clock = new ManualClock(T0);
    const g = generator(clock, { randomSequenceStart: 0 });
    const ids = Array.from({ length: 4096 }, () => g.nextId());
    expect(g.decode(ids[4095]!).sequence).toBe(4095);
    const next = g.decode(g.nextId());
    expect(next.timestampMs).toBe(T0 + 1);
    expect(next.sequence).toBe(0);
    expect(clock.now()).toBe(T0 + 1);
  });

  it("issues strictly increasing ids, single and in batches", () => {
    const clock = new ManualClock(T0);
    clock.onNow = (c) => c.advance(Math.random() < 0.001 ? 1 : 0);
    const g = generator(clock);
    let last = -1n;
    for (let round = 0; round < 50; round++) {
      const batch = round % 2 === 0 ? g.nextIds(5000) : [g.nextId(), g.nextId()];
      for (const id of batch) {
        expect(id > last).toBe(true);
        last = id;
      }
    }
  });

  it("issues its first id strictly after the lease's last timestamp", () => {
    const clock = new ManualClock(T0);
    const g = generator(clock, { lastTimestamp: T0 });
    const first = g.decode(g.nextId());
    expect(first.timestampMs).toBe(T0 + 1);
  });

  it("waits out a clock that moved back within the tolerance", () => {
    const clock = new ManualClock(T0);
    const events: unknown[] = [];
    const g = generator(clock, { onClockRollback: (e) => events.push(e) });
    const before = g.nextId();
    clock.set(T0 - 3);
    const after = g.nextId();
    expect(after > before).toBe(true);
    expect(clock.now()).toBeGreaterThanOrEqual(T0);
    expect(events).toEqual([{ offsetMs: 3, action: "waited", workerId: 7 }]);
  });

  it("answers Leaf code -1 when the clock is still behind after waiting", () => {
    const clock = new ManualClock(T0);
    const g = generator(clock);
    g.nextId();
    clock.set(T0 - 4);
    clock.onSleep = () => {}; // the clock does not move while waiting
    const error = errorOf(() => g.nextId());
    expect(error).toMatchObject({ code: ErrorCodes.CLOCK_BEHIND, leafCode: -1 });
  });

  it("refuses with Leaf code -3 when the clock moved back past the tolerance", () => {
    const clock = new ManualClock(T0);
    const g = generator(clock);
    g.nextId();
    clock.set(T0 - 2000);
    const error = errorOf(() => g.nextId());
    expect(error).toBeInstanceOf(LeafError);
    expect(error).toMatchObject({ code: ErrorCodes.CLOCK_MOVED_BACKWARDS, leafCode: -3 });
    expect((error as Error).message).toMatch(
      /\[leaf\] \[core\] clock moved backwards by 2000 ms \(tolerance 5 ms\)/,
    );
    clock.set(T0 + 1);
    expect(g.decode(g.nextId()).timestampMs).toBe(T0 + 1);
  });

  it("switches to a backup worker id when the clock moves back past the tolerance", () => {
    const clock = new ManualClock(T0);
    const events: { action: string; workerId: number }[] = [];
    const g = generator(clock, {
      backups: [{ workerId: 519, lastTimestamp: T0 - 60_000 }],
      onClockRollback: (e) => events.push(e),
    });
    const a = g.nextId();
    clock.set(T0 - 10_000);
    const b = g.decode(g.nextId());
    expect(b.workerId).toBe(519);
    expect(b.timestampMs).toBe(T0 - 10_000);
    expect(g.activeWorkerId).toBe(519);
    expect(events.at(-1)).toMatchObject({ action: "backup", workerId: 519 });
    // A second rollback beyond what the backup has issued: no usable id is left.
    clock.set(T0 - 20_000);
    expect(codeOf(() => g.nextId())).toBe(ErrorCodes.CLOCK_MOVED_BACKWARDS);
    // Time passes the primary's last tick again: back on the primary id.
    clock.set(T0 + 5);
    const c = g.decode(g.nextId());
    expect(c.workerId).toBe(519);
    expect(g.timestamps()).toMatchObject({
      primary: { workerId: 7, lastTimestamp: g.decode(a).timestampMs },
      backups: [{ workerId: 519, lastTimestamp: T0 + 5 }],
    });
  });

  it("does not use a backup whose own last timestamp is ahead of the clock", () => {
    const clock = new ManualClock(T0);
    const g = generator(clock, { backups: [{ workerId: 8, lastTimestamp: T0 + 1000 }] });
    g.nextId();
    clock.set(T0 - 100);
    expect(codeOf(() => g.nextId())).toBe(ErrorCodes.CLOCK_MOVED_BACKWARDS);
  });

  it("does not loop forever when the clock moves back while it waits for the next tick", () => {
    const clock = new ManualClock(T0);
    const g = generator(clock, { randomSequenceStart: 0 });
    g.nextIds(4096);
    clock.onSleep = (_ms, c) => c.advance(-1000);
    expect(codeOf(() => g.nextId())).toBe(ErrorCodes.CLOCK_MOVED_BACKWARDS);
  });

  it("gives up waiting for a stuck clock with a clear error instead of spinning", () => {
    const clock = new ManualClock(T0);
    const g = generator(clock, { randomSequenceStart: 0 });
    g.nextIds(4096);
    clock.onSleep = () => {};
    expect(codeOf(() => g.nextId())).toBe(ErrorCodes.CLOCK_BEHIND);
  });

  it("refuses ids past the layout's last instant instead of wrapping", () => {
    const small = defineLayout(
      { name: "tiny", timestampBits: 10, workerBits: 4, sequenceBits: 4, unitMillis: 1, epoch: T0 },
      T0,
    );
    const clock = new ManualClock(small.lastInstantMs);
    const g = new SnowflakeGenerator({ workerId: 1, layout: small, clock, onWarning: () => {} });
    const last = g.decode(g.nextId());
    expect(last.ticks).toBe(small.maxTicks);
    clock.advance(1);
    const error = errorOf(() => g.nextId());
    expect(error).toMatchObject({ code: ErrorCodes.LAYOUT_EXHAUSTED });
    expect((error as Error).message).toMatch(/cannot represent .* its last instant/);
  });

  it("refuses every id of a layout whose time has run out (Baidu's default epoch)", () => {
    const g = new SnowflakeGenerator({ workerId: 1, layout: layouts.baidu, onWarning: () => {} });
    expect(codeOf(() => g.nextId())).toBe(ErrorCodes.LAYOUT_EXHAUSTED);
  });

  it("warns through the hook when less than the configured time is left", () => {
    const onWarning = vi.fn();
    const clock = new ManualClock(layouts.leaf.lastInstantMs - 100 * 86_400_000);
    const g = new SnowflakeGenerator({ workerId: 1, clock, onWarning });
    g.nextId();
    g.nextId();
    expect(onWarning).toHaveBeenCalledTimes(1);
    expect(onWarning.mock.calls[0]![0]).toMatchObject({ type: "layout-expiry" });
    expect(onWarning.mock.calls[0]![0].message).toMatch(
      /runs out of time in 100 days, on 2080-07-10/,
    );
    const quiet = vi.fn();
    new SnowflakeGenerator({ workerId: 1, clock: new ManualClock(T0), onWarning: quiet }).nextId();
    expect(quiet).not.toHaveBeenCalled();
  });

  it("refuses ids with Leaf code -4 while fenced, and resumes under a new lease after its timestamp", () => {
    const clock = new ManualClock(T0);
    const g = generator(clock);
    g.nextId();
    g.fence();
    expect(g.state).toBe("fenced");
    const error = errorOf(() => g.nextId());
    expect(error).toMatchObject({ code: ErrorCodes.LEASE_LOST, leafCode: -4 });
    clock.advance(10);
    g.setLease({ workerId: 9, lastTimestamp: T0 + 50 });
    expect(g.state).toBe("active");
    clock.set(T0 + 60);
    const next = g.decode(g.nextId());
    expect(next.workerId).toBe(9);
    expect(next.timestampMs).toBe(T0 + 60);
  });

  it("stops issuing at the lease's fenceAt deadline and resumes when a renewal moves it", () => {
    const clock = new ManualClock(T0);
    const lease = { fenceAt: performance.now() + 60_000 };
    const g = generator(clock, { lease });
    g.nextId();
    lease.fenceAt = performance.now() - 1;
    clock.advance(1);
    const error = errorOf(() => g.nextId());
    expect(error).toMatchObject({ code: ErrorCodes.LEASE_LOST, leafCode: -4 });
    expect((error as Error).message).toMatch(/lease ran out on this node's clock/);
    lease.fenceAt = performance.now() + 60_000;
    expect(g.decode(g.nextId()).timestampMs).toBe(T0 + 1);
  });

  it("issues nothing timestamped past the lease's horizon (a clock stepped forward) until a renewal stores a later one", () => {
    const clock = new ManualClock(T0);
    const lease = { fenceAt: performance.now() + 60_000, horizon: T0 + 1000 };
    const g = generator(clock, { randomSequenceStart: 0, lease });
    clock.set(T0 + 1000);
    const atHorizon = g.decode(g.nextId());
    expect(atHorizon.timestampMs).toBe(T0 + 1000);
    // The wall clock steps forward 20 s; the monotonic fence is still a minute away.
    clock.set(T0 + 21_000);
    const error = errorOf(() => g.nextId());
    expect(error).toMatchObject({ code: ErrorCodes.LEASE_LOST, leafCode: -4 });
    expect((error as Error).message).toContain(new Date(T0 + 1000).toISOString());
    expect((error as Error).message).toContain(new Date(T0 + 21_000).toISOString());
    expect(codeOf(() => g.nextIds(10))).toBe(ErrorCodes.LEASE_LOST);
    expect(g.state).toBe("active");
    // A renewal sent on the stepped clock stores a later horizon: ids resume.
    lease.horizon = T0 + 30_000;
    expect(g.decode(g.nextId()).timestampMs).toBe(T0 + 21_000);
  });

  it("applies the horizon to a backup worker id too, and by whole ticks of a seconds layout", () => {
    const clock = new ManualClock(T0 + 10_000);
    const lease = { horizon: T0 + 10_500 };
    const g = new SnowflakeGenerator({
      workerId: 1,
      clock,
      layout: layouts.safe53s,
      backups: [{ workerId: 2, lastTimestamp: 0 }],
      randomSequenceStart: 0,
      lease,
    });
    // The tick of second T0 + 10 s starts before the horizon: issued.
    expect(g.decode(g.nextId()).workerId).toBe(1);
    clock.set(T0 + 11_000);
    expect(codeOf(() => g.nextId())).toBe(ErrorCodes.LEASE_LOST);
    lease.horizon = T0 + 11_000;
    expect(g.decode(g.nextId()).timestampMs).toBe(T0 + 11_000);
    // The clock moves back past the tolerance: the backup takes over, under the same horizon.
    clock.set(T0 + 5_000);
    expect(g.decode(g.nextId()).workerId).toBe(2);
    clock.set(T0 + 12_000);
    expect(codeOf(() => g.nextId())).toBe(ErrorCodes.LEASE_LOST);
  });

  it("never issues a tick read after fenceAt: a pause inside the wait for the next tick is caught (a clock whose read blocks)", () => {
    const clock = new ManualClock(T0);
    const lease = { fenceAt: performance.now() + 30 };
    const g = generator(clock, { randomSequenceStart: 0, lease });
    const tick = g.nextIds(4096); // the whole of tick T0: the next id must wait for T0 + 1
    // The next call reads T0 (sequence used up: the slow path, fenceAt not passed yet), then waits
    // for T0 + 1. Its read inside that wait blocks, really, until past fenceAt (a SIGSTOP or a
    // blocked event loop there), and returns the next tick.
    let reads = 0;
    clock.onNow = (c) => {
      if (++reads !== 2) return;
      while (performance.now() <= lease.fenceAt + 1) {
        // blocked
      }
      c.set(T0 + 1);
    };
    const error = errorOf(() => g.nextId());
    expect(isLeafError(error) && error.code).toBe(ErrorCodes.LEASE_LOST);
    expect(reads).toBe(2);
    // Later calls in that tick do not slip through a fast path either.
    clock.onNow = undefined;
    expect(codeOf(() => g.nextId())).toBe(ErrorCodes.LEASE_LOST);
    expect(codeOf(() => g.nextIds(10))).toBe(ErrorCodes.LEASE_LOST);
    // A renewal moves fenceAt: ids resume, after every earlier one.
    lease.fenceAt = performance.now() + 60_000;
    expect(g.nextId() > tick[4095]!).toBe(true);
  });

  it("never issues after fenceAt when the wait for a clock moved back (within the tolerance) outlasts the lease", () => {
    const clock = new ManualClock(T0);
    const lease = { fenceAt: performance.now() + 30 };
    const g = generator(clock, { randomSequenceStart: 0, lease });
    const first = g.nextId();
    clock.set(T0 + 1);
    g.nextId();
    // The clock steps back 2 ms: the generator waits it out, and that wait blocks past fenceAt.
    clock.set(T0 - 1);
    let reads = 0;
    clock.onNow = (c) => {
      if (++reads !== 2) return;
      while (performance.now() <= lease.fenceAt + 1) {
        // blocked
      }
      c.set(T0 + 2);
    };
    expect(codeOf(() => g.nextId())).toBe(ErrorCodes.LEASE_LOST);
    clock.onNow = undefined;
    lease.fenceAt = performance.now() + 60_000;
    expect(g.nextId() > first).toBe(true);
  });

  it("keeps a batch increasing when it moves to a backup worker id mid-batch (clock moved back)", async () => {
    for (const call of ["nextIds", "nextIdsAsync"] as const) {
      const clock = new ManualClock(T0);
      const rollbacks: string[] = [];
      const g = generator(clock, {
        randomSequenceStart: 0,
        backups: [{ workerId: 3, lastTimestamp: 0 }],
        onClockRollback: (e) => rollbacks.push(`${e.action} ${e.workerId}`),
      });
      // Each clock reading moves 1 ms on; the third one (the batch's third tick) finds the clock
      // stepped back 1 s, past the tolerance: the rest of the batch comes from backup worker id 3,
      // whose ids are lower (earlier time, lower worker id).
      let reads = 0;
      clock.onNow = (c) => {
        reads++;
        c.advance(reads === 3 ? -1000 : 1);
      };
      const ids = call === "nextIds" ? g.nextIds(20_000) : await g.nextIdsAsync(20_000, 5000);
      expect(rollbacks, call).toEqual(["backup 3"]);
      const workers = new Set(ids.map((id) => g.decode(id).workerId));
      expect(workers, call).toEqual(new Set([7, 3]));
      let decreases = 0;
      for (let i = 1; i < ids.length; i++) if (ids[i]! <= ids[i - 1]!) decreases++;
      expect(decreases, call).toBe(0);
      expect(new Set(ids).size, call).toBe(ids.length);
    }
  });

  it("generates a large batch in chunks with a turn of the event loop between them", async () => {
    const g = new SnowflakeGenerator({ workerId: 1 });
    let turns = 0;
    const counting = setInterval(() => turns++, 0);
    const ids = await g.nextIdsAsync(50_000, 4096);
    clearInterval(counting);
    expect(turns).toBeGreaterThan(0);
    expect(ids.length).toBe(50_000);
    for (let i = 1; i < ids.length; i++) expect(ids[i]! > ids[i - 1]!).toBe(true);
    await expect(g.nextIdsAsync(0)).rejects.toThrow(/count.*0.*from 1 to 10,000,000/);
    await expect(g.nextIdsAsync(5, 0)).rejects.toThrow(/invalid chunk: 0/);
  });

  it("rejects worker ids outside the layout and bad options, naming them", () => {
    expect(() => new SnowflakeGenerator({ workerId: 1024 })).toThrow(
      /invalid workerId: 1024; expected an integer from 0 to 1023/,
    );
    expect(() => new SnowflakeGenerator({ workerId: -1 })).toThrow(/workerId/);
    expect(() => new SnowflakeGenerator({ workerId: 1, rollbackToleranceMs: -5 })).toThrow(
      /rollbackToleranceMs/,
    );
    expect(
      () => new SnowflakeGenerator({ workerId: 1, backups: [{ workerId: 1, lastTimestamp: 0 }] }),
    ).toThrow(/distinct/);
    const g = new SnowflakeGenerator({ workerId: 1 });
    expect(() => g.nextIds(0)).toThrow(/invalid count: 0/);
    expect(() => g.nextIds(1.5)).toThrow(/invalid count/);
  });

  it("decodes with its own layout and epoch", () => {
    const layout = defineLayout({
      timestampBits: 41,
      workerBits: 10,
      sequenceBits: 12,
      unitMillis: 1,
      epoch: Date.UTC(2024, 0, 1),
    });
    const clock = new ManualClock(T0);
    const g = new SnowflakeGenerator({ workerId: 3, layout, clock });
    const decoded = g.decode(g.nextId());
    expect(decoded.timestampMs).toBe(T0);
    expect(decoded.workerId).toBe(3);
  });
});
