// The nemesis checker's worker-id tenures on histories written by hand (no processes): two
// processes whose ids of one worker id are dated in the same stretch of time break the promise
// even when no id repeats; a restart after the previous holder, and a holder that takes its worker
// id back after another held it (its refusals in between), do not.
import { defineLayout, layouts } from "@leaf/core";
import { describe, expect, it } from "vitest";
import { check, type Window } from "../src/nemesis/checker";
import { History } from "../src/nemesis/history";

/** The leased families' layout: Leaf's, with 2 worker-id bits. */
const layout = defineLayout({ ...layouts.leaf, name: "leaf (custom)", workerBits: 2 });
const snowflake = (oneProcessPerServer = true) => ({
  layouts: new Map(["A", "B", "S"].map((label) => [label, layout])),
  oneProcessPerServer,
});

/** A small run: ids dated `atMs` after the run began, answered then. */
class Run {
  readonly history = new History();

  ids(server: string, incarnation: number, workerId: number, atMs: number[], firstSequence = 0) {
    const ids = atMs.map((ms, i) =>
      layout.compose({
        ticks: layout.ticksAt(this.history.wallMs0 + ms),
        workerId,
        sequence: firstSequence + i,
      }),
    );
    const toMs = Math.max(...atMs) + 1;
    this.history.record(
      {
        client: `${server} json snowflake`,
        server,
        incarnation,
        fromMs: toMs - 1,
        toMs,
        mode: "snowflake",
        space: "snowflake:nem",
        ids: ids.length,
      },
      ids,
      true,
    );
    return this;
  }

  refused(server: string, incarnation: number, atMs: number, code = "LEASE_LOST") {
    this.history.record(
      {
        client: `${server} json snowflake`,
        server,
        incarnation,
        fromMs: atMs,
        toMs: atMs + 1,
        mode: "snowflake",
        space: "snowflake:nem",
        ids: 0,
        code,
      },
      [],
      false,
    );
    return this;
  }

  verdict(oneProcessPerServer = true) {
    // B's lease lapsed while S took its worker id: its refusals are documented.
    const standby: Window = {
      step: 1,
      fault: "standby",
      target: "B",
      fromMs: 0,
      stoppedMs: 20_000,
      toMs: 20_000,
      effects: [{ servers: ["B"], codes: ["LEASE_LOST"] }],
    };
    return check(this.history, [standby], [], [], snowflake(oneProcessPerServer));
  }
}

describe("the nemesis checker's worker-id tenures", () => {
  it("fails a holder's ids dated inside the next holder's, though no id repeats", () => {
    // B issues a batch over a pause: its first tick before S took worker id 3, its last after.
    const run = new Run()
      .ids("B", 1, 3, [1000, 1001])
      .ids("S", 1, 3, [5000])
      .ids("S", 1, 3, [9000])
      .ids("B", 1, 3, [1002, 7000], 100)
      .ids("S", 1, 3, [12_000]);
    const v = run.verdict();
    expect(v.duplicates).toEqual({});
    expect(v.broken).toEqual(["worker-ids"]);
    expect(v.overlaps).toBe(1);
    const o = v.firstOverlap!;
    expect(o.workerId).toBe(3);
    expect(o.earlier.process).toBe("B #1");
    expect(o.later.process).toBe("S #1");
    expect(o.earlier.lastAnswer.toMs).toBe(7001);
    // S's first id (5.0 s) is inside B's tenure (1.0-7.0 s); in 5.0-7.0 s B has 1 id, S 1.
    expect([o.later.fromMs, o.earlier.toMs]).toEqual([5000, 7000]);
    expect([o.earlier.idsInOverlap, o.later.idsInOverlap]).toEqual([1, 1]);
  });

  it("fails two processes in the same millisecond of one worker id", () => {
    const run = new Run().ids("A", 1, 0, [1000, 2000]).ids("A", 2, 0, [2000], 5);
    expect(run.verdict().broken).toEqual(["worker-ids"]);
  });

  it("passes a restart dated after the previous process, and other worker ids at the same time", () => {
    const run = new Run()
      .ids("A", 1, 0, [1000, 2000])
      .ids("B", 1, 1, [1500, 2500])
      .ids("A", 2, 0, [2001])
      .ids("B", 1, 1, [3000]);
    expect(run.verdict().broken).toEqual([]);
  });

  it("passes a holder that takes its worker id back after another held it, refused in between", () => {
    const refusedBetween = new Run()
      .ids("B", 1, 1, [1000, 2000])
      .refused("B", 1, 2500)
      .ids("S", 1, 1, [6000, 7000])
      .ids("B", 1, 1, [11_000]);
    expect(refusedBetween.verdict().broken).toEqual([]);
    // Or with ids of another worker id in between, on a server of one process.
    const movedBetween = new Run()
      .ids("B", 1, 1, [1000, 2000])
      .ids("B", 1, 2, [3000])
      .ids("S", 1, 1, [6000, 7000])
      .ids("B", 1, 1, [11_000]);
    expect(movedBetween.verdict().broken).toEqual([]);
    // Without either, B's ids 1.0-11.0 s span S's: the check cannot tell, and fails it.
    const nothingBetween = new Run()
      .ids("B", 1, 1, [1000, 2000])
      .ids("S", 1, 1, [6000, 7000])
      .ids("B", 1, 1, [11_000]);
    expect(nothingBetween.verdict().broken).toEqual(["worker-ids"]);
  });

  it("on servers of several worker processes, tells the processes apart by worker id", () => {
    // A's two workers hold 0 and 1 and answer in turn; a restarted A's worker 0 comes after.
    const run = new Run()
      .ids("A", 1, 0, [1000])
      .ids("A", 1, 1, [1001])
      .ids("A", 1, 0, [2000])
      .ids("A", 1, 1, [2001])
      .ids("A", 2, 0, [3000]);
    expect(run.verdict(false).broken).toEqual([]);
    const late = new Run().ids("A", 1, 0, [1000]).ids("A", 2, 0, [3000]).ids("A", 1, 0, [3500]);
    expect(late.verdict(false).broken).toEqual(["worker-ids"]);
  });

  it("fails ids that decode to a date a day away from the run (a wrong layout)", () => {
    const run = new Run().ids("A", 1, 0, [1000]);
    const wrong = { layouts: new Map([["A", layouts.leaf]]), oneProcessPerServer: true };
    expect(check(run.history, [], [], [], wrong).broken).toEqual(["dates"]);
  });
});
