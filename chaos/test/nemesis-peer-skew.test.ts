// A clock step on one server of a ZooKeeper family can keep another server from serving: the
// registry's peer clock check refuses a lost lease's re-acquire (and a start) on a server whose
// clock is more than 5 s off its live peers'. The 60-minute run of 28 Nov (seed 2816) failed on
// codes there: C's session was lost while ZooKeeper was killed, and its re-acquire was refused for
// 36 s against A, an hour ahead. Hand-built windows and clocks, no processes.
import { describe, expect, it } from "vitest";
import { check, type Window } from "../src/nemesis/checker";
import { type Family, selectFamilies } from "../src/nemesis/families";
import { faultNamed } from "../src/nemesis/faults/catalogue";
import { peerSkewEffects } from "../src/nemesis/faults/fault";
import { refusedAt } from "./refused-answer";

const recycle = selectFamilies(["snowflake-zk-recycle"])[0]!;
const etcd = selectFamilies(["snowflake-etcd"])[0]!;

const clocks = (offsets: Record<string, number>) =>
  new Map(Object.entries(offsets).map(([label, offsetMs]) => [label, { offsetMs }]));

/** A clock-forward window on `target` from `fromMs`, with what run.ts adds for the clocks now. */
function forward(
  of: Family,
  target: string,
  fromMs: number,
  now: Map<string, { offsetMs: number }>,
) {
  const e = faultNamed("clock-forward").effects(of, target, { forwardMs: 3_600_000 });
  const window: Window = {
    step: 1,
    fault: "clock-forward",
    target,
    fromMs,
    stoppedMs: fromMs + 500,
    toMs: e.lasting ? Infinity : fromMs + 500 + e.settleMs,
    effects: [...e.effects, ...peerSkewEffects(now, of)],
  };
  return window;
}

/** One LEASE_LOST answer of `server` at `atMs`. */
const leaseLost = (server: string, atMs: number) =>
  refusedAt(server, atMs, "LEASE_LOST", "snowflake");

describe("peerSkewEffects", () => {
  it("is every server's CLOCK_SKEW and LEASE_LOST once two main servers' clocks are more than the limit apart", () => {
    expect(peerSkewEffects(clocks({ A: 3_600_000, B: 0, C: 0 }), recycle)).toEqual([
      { servers: ["*"], codes: ["CLOCK_SKEW", "LEASE_LOST"] },
    ]);
    // Three small steps left there add up (B 13.8 s ahead in the run of seed 2816).
    expect(peerSkewEffects(clocks({ A: 0, B: 13_800, C: 0 }), recycle)).toHaveLength(1);
  });

  it("is nothing while the clocks stay within the limit, or on a registry without the check", () => {
    expect(peerSkewEffects(clocks({ A: 3000, B: 0, C: 1000 }), recycle)).toEqual([]);
    expect(peerSkewEffects(clocks({ A: 3_600_000, B: 0, C: 0 }), etcd)).toEqual([]);
  });

  it("ignores the spare (it runs on the clock of the server it stands in for)", () => {
    expect(peerSkewEffects(clocks({ A: 0, B: 0, C: 0, S: 3_600_000 }), recycle)).toEqual([]);
  });
});

describe("the checker with a clock an hour ahead on A", () => {
  it("accepts C's LEASE_LOST long after the step (its re-acquire refused against A)", () => {
    const window = forward(recycle, "A", 85_000, clocks({ A: 3_600_000, B: 0, C: 0 }));
    expect(check(leaseLost("C", 139_000), [window], []).broken).toEqual([]);
  });

  it("refuses it with the step's own effects only, as before (the run's failure)", () => {
    const e = faultNamed("clock-forward").effects(recycle, "A", { forwardMs: 3_600_000 });
    const window: Window = {
      step: 1,
      fault: "clock-forward",
      target: "A",
      fromMs: 85_000,
      stoppedMs: 85_500,
      toMs: Infinity,
      effects: e.effects,
    };
    expect(check(leaseLost("C", 139_000), [window], []).broken).toEqual(["codes"]);
  });

  it("refuses C's LEASE_LOST on etcd, whose registry compares no peers' clocks", () => {
    const window = forward(etcd, "A", 85_000, clocks({ A: 3_600_000, B: 0, C: 0 }));
    expect(check(leaseLost("C", 139_000), [window], []).broken).toEqual(["codes"]);
  });
});
