// The nemesis checker on a residue set's history, written by hand (no processes): what it accepts
// while one database of two is down (nothing: the set serves through it) and while both are, and
// which ids it asks to increase (per residue class, not across the set).
import { describe, expect, it } from "vitest";
import { check, type Window } from "../src/nemesis/checker";
import { selectFamilies } from "../src/nemesis/families";
import { faultNamed } from "../src/nemesis/faults/catalogue";
import { History } from "../src/nemesis/history";
import { stallWindows } from "../src/nemesis/stalls";
import { refusedAt } from "./refused-answer";

const family = selectFamilies(["segment-residue"])[0]!;

/**
 * The window of `fault` on `target` from `fromMs` to `toMs`, with the effects the fault declares in
 * `of` (segment-residue unless said).
 */
function window(
  fault: string,
  target: string,
  fromMs: number,
  toMs: number,
  of = family,
  params: Record<string, string> = {},
): Window {
  return {
    step: 1,
    fault,
    target,
    fromMs,
    stoppedMs: toMs,
    toMs,
    effects: faultNamed(fault).effects(of, target, params).effects,
  };
}

describe("the nemesis checker on segment-residue", () => {
  it("refuses a store code while only one database of the set is down for that server", () => {
    for (const w of [
      window("store-kill", "mysql", 0, 5000),
      window("store-pause", "postgres", 0, 5000),
      window("link-cut", "A~postgres", 0, 5000),
      window("row-lock", "nem", 0, 5000),
    ]) {
      expect(check(refusedAt("A", 1000), [w], []).broken).toEqual(["codes"]);
    }
  });

  it("accepts it while the faults active take both databases away from that server, and only there", () => {
    const windows = [
      window("store-kill", "mysql", 0, 5000),
      window("link-cut", "B~postgres", 0, 5000),
    ];
    expect(check(refusedAt("B", 1000), windows, []).broken).toEqual([]);
    expect(check(refusedAt("A", 1000), windows, []).broken).toEqual(["codes"]);
    // Not at once: B had one database at every moment.
    const apart = [
      window("store-kill", "mysql", 0, 900),
      window("link-cut", "B~postgres", 1100, 5000),
    ];
    expect(check(refusedAt("B", 1000), apart, []).broken).toEqual(["codes"]);
    const both = [window("residue-outage", "mysql+postgres", 0, 5000)];
    expect(check(refusedAt("C", 1000), both, []).broken).toEqual([]);
  });

  it("asks ids to increase per residue class of one server process, not across the classes", () => {
    const history = new History();
    const answer = (ids: bigint[], atMs: number) =>
      history.record(
        {
          client: "A java segment",
          server: "A",
          incarnation: 1,
          fromMs: atMs,
          toMs: atMs + 1,
          mode: "segment",
          space: "segment:nem",
          ids: ids.length,
        },
        ids,
        { classes: 2 },
      );
    // Even ids from one database, then odd ones from the other, lower: allowed.
    answer([5000n, 5002n], 0);
    answer([3001n, 3003n], 10);
    answer([5004n], 20);
    expect(check(history, [], []).broken).toEqual([]);
    // An even id below an even id already answered: a decrease.
    answer([4998n], 30);
    const verdict = check(history, [], []);
    expect(verdict.broken).toEqual(["decreases"]);
    expect(verdict.firstDecrease).toContain("5004 then 4998");
  });
});

const segment = selectFamilies(["segment"])[0]!;
/** The window of `fault` on `target` on the segment family (max-id-back restarting no server). */
const on = (fault: string, target: string, fromMs: number, toMs: number) =>
  window(fault, target, fromMs, toMs, segment, { restart: "none" });
/** A stall of `server`'s event loop, as the run makes it from a stall file (stalls.ts). */
const stall = (server: string, fromMs: number, ms: number): Window =>
  stallWindows(segment, [{ server, fromMs, ms }])[0]!;

describe("the nemesis checker on a fault that outlasts its window behind a link cut", () => {
  // max_id set back 0-10 s (its codes accepted until 10 s); A cut off from MariaDB 8-20 s: A reads
  // the row put back only after the cut, so its refusal (CORRUPT_DATA) may last until then.
  const windows = [on("max-id-back", "nem", 0, 10_000), on("link-cut", "A~mysql", 8_000, 20_000)];

  it("accepts the fault's codes on the server cut off, until the cut ends", () => {
    expect(check(refusedAt("A", 15_000, "CORRUPT_DATA"), windows, []).broken).toEqual([]);
  });

  it("and nowhere else, nor after the cut", () => {
    expect(check(refusedAt("B", 15_000, "CORRUPT_DATA"), windows, []).broken).toEqual(["codes"]);
    expect(check(refusedAt("A", 25_000, "CORRUPT_DATA"), windows, []).broken).toEqual(["codes"]);
  });
});

describe("the nemesis checker on a fault that outlasts a link cut and then a stall", () => {
  // Seed 2711's segment run: max_id set back (accepted until 10 s), A cut off from MariaDB 8-20 s
  // (extended to 20 s), then A's event loop stalled 18-23 s (to 28 s with its recovery): the read
  // that would have shown A the row put back waited out the stall.
  const windows = [
    on("max-id-back", "nem", 0, 10_000),
    on("link-cut", "A~mysql", 8_000, 20_000),
    stall("A", 18_000, 5_000),
  ];

  it("accepts the fault's codes on that server through the stall that began before the cut's end", () => {
    expect(check(refusedAt("A", 25_000, "CORRUPT_DATA"), windows, []).broken).toEqual([]);
  });

  it("and not on another server, nor after the stall's recovery", () => {
    expect(check(refusedAt("B", 25_000, "CORRUPT_DATA"), windows, []).broken).toEqual(["codes"]);
    expect(check(refusedAt("A", 29_000, "CORRUPT_DATA"), windows, []).broken).toEqual(["codes"]);
  });

  it("nor through a stall that began after the extended window had ended", () => {
    const late = [windows[0]!, windows[1]!, stall("A", 21_000, 5_000)];
    expect(check(refusedAt("A", 25_000, "CORRUPT_DATA"), late, []).broken).toEqual(["codes"]);
  });

  it("nor through a stall of another server", () => {
    const other = [windows[0]!, windows[1]!, stall("B", 18_000, 5_000)];
    expect(check(refusedAt("A", 25_000, "CORRUPT_DATA"), other, []).broken).toEqual(["codes"]);
  });
});
