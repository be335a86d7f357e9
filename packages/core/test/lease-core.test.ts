import { describe, expect, it } from "vitest";
import { LeaseCore, leaseLostError } from "../src/adapter";
import { ErrorCodes, isLeafError, type LeafError } from "../src/index";

/** A lease whose store is an array of calls, with a gate to hold a store call open. */
class RecordingLease extends LeaseCore {
  readonly calls: string[] = [];
  gate: Promise<void> | undefined;
  deadline: number | undefined = 12_345;

  constructor() {
    super({
      component: "registry-test",
      workerId: 3,
      lastTimestamp: 1_000,
      backups: [{ workerId: 4, lastTimestamp: 900 }],
    });
  }

  protected override liveFenceAt(): number | undefined {
    return this.deadline;
  }

  protected async store(reported: ReadonlyMap<number, number>): Promise<void> {
    this.calls.push(`store-start ${[...reported.keys()].join(",")}`);
    await this.gate;
    this.calls.push(`store ${[...reported.keys()].map((id) => `${id}=${this.highest(id)}`)}`);
  }

  protected async free(finalTimestampMs: number | undefined): Promise<void> {
    this.calls.push(`free ${finalTimestampMs} ${this.highest(this.workerId)} ${this.released}`);
  }

  take(why: string): LeafError {
    return this.lose(why, { details: { path: "/x" } });
  }
}

describe("LeaseCore", () => {
  it("keeps the highest timestamp per held id and never lowers it", async () => {
    const lease = new RecordingLease();
    await lease.report(5_000, [{ workerId: 4, lastTimestamp: 4_000 }]);
    await lease.report(2_000, [{ workerId: 4, lastTimestamp: 100 }]);
    expect(lease.calls).toEqual([
      "store-start 3,4",
      "store 3=5000,4=4000",
      "store-start 3,4",
      "store 3=5000,4=4000",
    ]);
  });

  it("runs reports and the release one at a time, in call order", async () => {
    const lease = new RecordingLease();
    let open!: () => void;
    lease.gate = new Promise((resolve) => {
      open = resolve;
    });
    const first = lease.report(2_000);
    const released = lease.release(3_000);
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(lease.calls).toEqual(["store-start 3"]);
    open();
    await first;
    await released;
    expect(lease.calls).toEqual(["store-start 3", "store 3=3000", "free 3000 3000 true"]);
  });

  it("refuses bad reports with INVALID_ARGUMENT naming the field, and backups it does not hold", async () => {
    const lease = new RecordingLease();
    await expect(lease.report(-1)).rejects.toMatchObject({ code: ErrorCodes.INVALID_ARGUMENT });
    await expect(lease.report(5, [{ workerId: 9, lastTimestamp: 5 }])).rejects.toThrow(
      /invalid backups: 9; expected one of this lease's backup worker ids \(4\)/,
    );
    await expect(lease.release(Number.NaN)).rejects.toThrow(/finalTimestampMs/);
    expect(lease.released).toBe(false);
    expect(lease.calls).toEqual([]);
  });

  it("releases once: later calls wait for the first and resolve; reports after it are CLOSED", async () => {
    const lease = new RecordingLease();
    const first = lease.release(2_000);
    const second = lease.release(9_000);
    expect(lease.released).toBe(true);
    expect(lease.fenceAt).toBe(0);
    await Promise.all([first, second]);
    expect(lease.calls).toEqual(["free 2000 2000 true"]);
    await expect(lease.report(3_000)).rejects.toMatchObject({ code: ErrorCodes.CLOSED });
  });

  it("aborts lost once with LEASE_LOST (-4), fences, and refuses reports with that reason", async () => {
    const lease = new RecordingLease();
    expect(lease.fenceAt).toBe(12_345);
    const reason = lease.take("its row was deleted");
    expect(lease.take("again")).toBe(reason);
    expect(lease.lost.aborted).toBe(true);
    expect(isLeafError(lease.lost.reason, ErrorCodes.LEASE_LOST)).toBe(true);
    expect(reason.leafCode).toBe(-4);
    expect(reason.message).toBe(
      "[leaf] [registry-test] worker id 3 lease lost: its row was deleted; no id may be issued under it any more",
    );
    expect(reason.details).toEqual({ workerId: 3, backups: [4], path: "/x" });
    expect(lease.fenceAt).toBe(0);
    await expect(lease.report(2_000)).rejects.toBe(reason);
    expect(lease.calls).toEqual([]);
  });

  it("builds the same LEASE_LOST error for generators and adapters", () => {
    const error = leaseLostError({
      component: "core",
      workerId: 7,
      why: "session expired",
      advice: "no ids until a new lease arrives",
    });
    expect(error.code).toBe(ErrorCodes.LEASE_LOST);
    expect(error.message).toBe(
      "[leaf] [core] worker id 7 lease lost: session expired; no ids until a new lease arrives",
    );
  });
});
