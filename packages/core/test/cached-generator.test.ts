import { describe, expect, it } from "vitest";
import {
  CachedSnowflakeGenerator,
  ErrorCodes,
  ManualClock,
  SnowflakeGenerator,
} from "../src/index";

const T0 = Date.UTC(2026, 0, 1);

describe("CachedSnowflakeGenerator", () => {
  it("serves a burst larger than one tick's sequence space from the buffer without waiting", () => {
    const clock = new ManualClock(T0);
    const inner = new SnowflakeGenerator({ workerId: 1, clock, randomSequenceStart: 0 });
    const cached = new CachedSnowflakeGenerator(inner, { bufferSize: 20_000 });
    cached.prefill();
    expect(cached.available).toBe(20_000);
    const filledUpTo = clock.now();
    clock.onSleep = () => {
      throw new Error("the burst had to wait for the clock");
    };
    const burst = cached.nextIds(12_000);
    expect(new Set(burst).size).toBe(12_000);
    expect(clock.now()).toBe(filledUpTo);
    for (let i = 1; i < burst.length; i++) expect(burst[i]! > burst[i - 1]!).toBe(true);
    cached.close();
  });

  it("refills in the background when fewer than paddingFactor percent remain", async () => {
    const inner = new SnowflakeGenerator({ workerId: 2 });
    const cached = new CachedSnowflakeGenerator(inner, { bufferSize: 10_000, paddingFactor: 50 });
    cached.prefill();
    cached.nextIds(6_000);
    expect(cached.available).toBe(4_000);
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(cached.available).toBe(10_000);
    cached.close();
  });

  it("refills on a schedule when one is set", async () => {
    const inner = new SnowflakeGenerator({ workerId: 3 });
    const cached = new CachedSnowflakeGenerator(inner, {
      bufferSize: 1_000,
      paddingFactor: 1,
      scheduleIntervalMs: 10,
    });
    await new Promise((resolve) => setTimeout(resolve, 60));
    expect(cached.available).toBe(1_000);
    cached.close();
  });

  it("never hands out an id whose time is ahead of the clock by more than the bound", () => {
    const clock = new ManualClock(T0);
    const inner = new SnowflakeGenerator({ workerId: 4, clock, randomSequenceStart: 0 });
    const cached = new CachedSnowflakeGenerator(inner, { bufferSize: 10_000, maxAheadMs: 1 });
    cached.prefill();
    const filledTo = clock.now();
    clock.set(filledTo - 1000);
    let error: unknown;
    try {
      for (let i = 0; i < 10_000; i++) cached.nextId();
    } catch (e) {
      error = e;
    }
    expect(error).toMatchObject({ code: ErrorCodes.CLOCK_MOVED_BACKWARDS });
    clock.set(filledTo + 1);
    expect(() => cached.nextId()).not.toThrow();
    cached.close();
  });

  it("hands out unique ids across refills", () => {
    const inner = new SnowflakeGenerator({ workerId: 5 });
    const cached = new CachedSnowflakeGenerator(inner, { bufferSize: 5_000 });
    const seen = new Set<bigint>();
    for (let i = 0; i < 50_000; i++) seen.add(cached.nextId());
    expect(seen.size).toBe(50_000);
    cached.close();
  });

  it("rejects bad options, naming them", () => {
    const inner = new SnowflakeGenerator({ workerId: 6 });
    expect(() => new CachedSnowflakeGenerator(inner, { bufferSize: 1 })).toThrow(
      /invalid bufferSize: 1/,
    );
    expect(() => new CachedSnowflakeGenerator(inner, { paddingFactor: 100 })).toThrow(
      /invalid paddingFactor: 100/,
    );
    expect(() => new CachedSnowflakeGenerator(inner, { scheduleIntervalMs: 0 })).toThrow(
      /scheduleIntervalMs/,
    );
  });
});
