// RenewingLease against a fake store whose renewals can be held open (a gate) or made to fail, with
// vitest's fake timers standing in for setTimeout and performance.now().
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import {
  checkLeaseTimings,
  type FenceReason,
  type RenewalConfirmed,
  RenewingLease,
} from "../src/adapter";
import { ErrorCodes, isLeafError, LeafError, ManualClock } from "../src/index";

const LEASE_MS = 1000;
const MARGIN_MS = 200;
const RENEW_MS = 100;

/**
 * A store that records each renewal's send time; `gate` holds renewals open, `failing` fails them.
 */
class FakeStoreLease extends RenewingLease {
  readonly renewals: number[] = [];
  /** What each renewal would write: held id = highest timestamp. */
  readonly renewed: string[] = [];
  readonly releases: string[] = [];
  gate: Promise<void> | undefined;
  failing = false;
  appliedLeaseMs: number | undefined;
  /** The horizon the next renewal says it stored. */
  storedHorizon: number | undefined;
  takenAway = false;

  constructor(sentAt: number, clock?: ManualClock, horizon?: number) {
    super(
      {
        component: "registry-test",
        workerId: 5,
        lastTimestamp: 1_000,
        backups: [{ workerId: 6, lastTimestamp: 900 }],
      },
      {
        leaseMs: LEASE_MS,
        safetyMarginMs: MARGIN_MS,
        renewIntervalMs: RENEW_MS,
        sentAt,
        clock,
        horizon,
      },
    );
  }

  protected async renewOnce(): Promise<RenewalConfirmed | undefined> {
    this.renewals.push(performance.now());
    this.renewed.push(
      this.heldIds()
        .map((id) => `${id}=${this.highest(id)}`)
        .join(","),
    );
    await this.gate;
    if (this.takenAway) throw this.lose("worker id 5 is held by another node");
    if (this.failing) {
      throw new LeafError({
        component: "registry-test",
        code: ErrorCodes.UNAVAILABLE,
        message: "store did not answer",
      });
    }
    if (this.appliedLeaseMs === undefined && this.storedHorizon === undefined) return undefined;
    return { leaseMs: this.appliedLeaseMs, horizon: this.storedHorizon };
  }

  protected async releaseOnce(finalTimestampMs: number | undefined): Promise<void> {
    this.releases.push(
      `release ${finalTimestampMs} ${this.heldIds().map((id) => `${id}=${this.highest(id)}`)}`,
    );
  }

  protected fenced(silentMs: number): FenceReason {
    return { why: `no renewal confirmed for ${silentMs} ms`, details: { store: "fake" } };
  }
}

/** A gate that stays shut until `open()`. */
function shutGate(): { promise: Promise<void>; open: () => void } {
  let open!: () => void;
  const promise = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { promise, open };
}

describe("RenewingLease", () => {
  beforeEach(() => {
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "performance"] });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it("renews every renewIntervalMs and moves the fence to the send time + lease - margin", async () => {
    const start = performance.now();
    const lease = new FakeStoreLease(start);
    expect(lease.fenceAt).toBe(start + LEASE_MS - MARGIN_MS);
    await vi.advanceTimersByTimeAsync(RENEW_MS * 3);
    expect(lease.renewals.map((t) => t - start)).toEqual([100, 200, 300]);
    expect(lease.lastRenewedAt).toBe(start + 300);
    expect(lease.fenceAt).toBe(start + 300 + LEASE_MS - MARGIN_MS);
    // Well past the first deadline, still live while renewals are confirmed.
    await vi.advanceTimersByTimeAsync(LEASE_MS * 3);
    expect(lease.lost.aborted).toBe(false);
    expect(lease.renewals).toHaveLength(33);
    await lease.release(2_000);
  });

  it("counts the deadline from the send time of a renewal, not from its answer", async () => {
    const start = performance.now();
    const lease = new FakeStoreLease(start);
    const gate = shutGate();
    lease.gate = gate.promise;
    await vi.advanceTimersByTimeAsync(RENEW_MS + 250);
    expect(lease.renewals.map((t) => t - start)).toEqual([100]);
    gate.open();
    lease.gate = undefined;
    await vi.advanceTimersByTimeAsync(0);
    expect(lease.lastRenewedAt).toBe(start + 100);
    expect(lease.fenceAt).toBe(start + 100 + LEASE_MS - MARGIN_MS);
    await lease.release();
  });

  it("fences at the deadline while a renewal hangs, and renews no more", async () => {
    const start = performance.now();
    const lease = new FakeStoreLease(start);
    lease.gate = shutGate().promise;
    await vi.advanceTimersByTimeAsync(LEASE_MS - MARGIN_MS - 1);
    expect(lease.lost.aborted).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    expect(lease.lost.aborted).toBe(true);
    const reason = lease.lost.reason as LeafError;
    expect(isLeafError(reason, ErrorCodes.LEASE_LOST)).toBe(true);
    expect(reason.message).toBe(
      "[leaf] [registry-test] worker id 5 lease lost: no renewal confirmed for 800 ms; no id may be issued under it any more",
    );
    expect(reason.details).toEqual({ workerId: 5, backups: [6], store: "fake" });
    expect(lease.fenceAt).toBe(0);
    expect(lease.renewals).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(LEASE_MS * 5);
    expect(lease.renewals).toHaveLength(1);
  });

  it("keeps the lease through failing renewals until the deadline, then loses it citing the last failure", async () => {
    const start = performance.now();
    const lease = new FakeStoreLease(start);
    lease.failing = true;
    await vi.advanceTimersByTimeAsync(LEASE_MS - MARGIN_MS - 1);
    expect(lease.lost.aborted).toBe(false);
    expect(lease.renewals).toHaveLength(7);
    expect(lease.fenceAt).toBe(start + LEASE_MS - MARGIN_MS);
    await expect(lease.report(2_000)).rejects.toMatchObject({ code: ErrorCodes.UNAVAILABLE });
    await vi.advanceTimersByTimeAsync(1);
    expect(lease.lost.aborted).toBe(true);
    const reason = lease.lost.reason as LeafError;
    expect(reason.message).toContain("no renewal confirmed for 800 ms");
    expect((reason.cause as LeafError).code).toBe(ErrorCodes.UNAVAILABLE);
    await expect(lease.report(2_001)).rejects.toBe(reason);
  });

  it("fences instead of renewing when a renewal is asked for past the deadline", async () => {
    const start = performance.now();
    const lease = new FakeStoreLease(start);
    lease.failing = true;
    await vi.advanceTimersByTimeAsync(LEASE_MS - MARGIN_MS - 50);
    const sent = lease.renewals.length;
    lease.failing = false;
    // The fence timer has not run yet (a blocked event loop) when a report comes past the deadline.
    const late = vi.spyOn(performance, "now").mockReturnValue(start + LEASE_MS - MARGIN_MS + 10);
    try {
      await expect(lease.report(2_000)).rejects.toMatchObject({ code: ErrorCodes.LEASE_LOST });
    } finally {
      late.mockRestore();
    }
    expect(lease.renewals).toHaveLength(sent);
    expect((lease.lost.reason as Error).message).toContain("no renewal confirmed for 810 ms");
  });

  it("loses the lease when the store says an id was taken away", async () => {
    const lease = new FakeStoreLease(performance.now());
    lease.takenAway = true;
    await vi.advanceTimersByTimeAsync(RENEW_MS);
    expect(lease.lost.aborted).toBe(true);
    expect((lease.lost.reason as Error).message).toContain("worker id 5 is held by another node");
    expect(vi.getTimerCount()).toBe(0);
    await vi.advanceTimersByTimeAsync(LEASE_MS * 2);
    expect(lease.renewals).toHaveLength(1);
  });

  it("follows the lease length the store applied (etcd's TTL)", async () => {
    const start = performance.now();
    const lease = new FakeStoreLease(start);
    lease.appliedLeaseMs = 3000;
    await vi.advanceTimersByTimeAsync(RENEW_MS);
    expect(lease.fenceAt).toBe(start + RENEW_MS + 3000 - MARGIN_MS);
    lease.gate = shutGate().promise;
    await vi.advanceTimersByTimeAsync(3000 - MARGIN_MS - 1);
    expect(lease.lost.aborted).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    expect(lease.lost.aborted).toBe(true);
  });

  it("holds the grant's horizon, raises it with each confirmed renewal, never lowers it, and keeps it through failed ones", async () => {
    const lease = new FakeStoreLease(performance.now(), undefined, 50_000);
    expect(lease.horizon).toBe(50_000);
    lease.storedHorizon = 51_000;
    await vi.advanceTimersByTimeAsync(RENEW_MS);
    expect(lease.horizon).toBe(51_000);
    lease.storedHorizon = 40_000;
    await vi.advanceTimersByTimeAsync(RENEW_MS);
    expect(lease.horizon).toBe(51_000);
    // A renewal the store did not confirm moves nothing, though it was sent with a later horizon.
    lease.failing = true;
    lease.storedHorizon = 90_000;
    await vi.advanceTimersByTimeAsync(RENEW_MS);
    expect(lease.horizon).toBe(51_000);
    lease.failing = false;
    await vi.advanceTimersByTimeAsync(RENEW_MS);
    expect(lease.horizon).toBe(90_000);
    await lease.release(2_000);
  });

  it("has no horizon when the store keeps none", async () => {
    const lease = new FakeStoreLease(performance.now());
    await vi.advanceTimersByTimeAsync(RENEW_MS);
    expect(lease.horizon).toBeUndefined();
    await lease.release(2_000);
  });

  it("stops renewing and fencing on release: nothing runs after it, and it is never lost", async () => {
    const lease = new FakeStoreLease(performance.now());
    await vi.advanceTimersByTimeAsync(RENEW_MS * 2);
    await lease.release(2_000);
    expect(lease.releases).toEqual(["release 2000 5=2000,6=900"]);
    expect(lease.fenceAt).toBe(0);
    await vi.advanceTimersByTimeAsync(LEASE_MS * 5);
    expect(lease.renewals).toHaveLength(2);
    expect(lease.lost.aborted).toBe(false);
    expect(vi.getTimerCount()).toBe(0);
  });

  it("keeps renewing when release refuses a bad final timestamp", async () => {
    const lease = new FakeStoreLease(performance.now());
    await expect(lease.release(Number.NaN)).rejects.toMatchObject({
      code: ErrorCodes.INVALID_ARGUMENT,
    });
    await vi.advanceTimersByTimeAsync(LEASE_MS * 2);
    expect(lease.lost.aborted).toBe(false);
    expect(lease.renewals).toHaveLength(20);
    await lease.release();
  });

  it("does not move the deadline for a renewal confirmed after the release began", async () => {
    const start = performance.now();
    const lease = new FakeStoreLease(start);
    const gate = shutGate();
    lease.gate = gate.promise;
    await vi.advanceTimersByTimeAsync(RENEW_MS);
    const released = lease.release(2_000);
    gate.open();
    await released;
    expect(lease.lastRenewedAt).toBe(start);
    expect(lease.releases).toEqual(["release 2000 5=2000,6=900"]);
    expect(vi.getTimerCount()).toBe(0);
  });

  it("renews at once on a report, writing the reported timestamps", async () => {
    const lease = new FakeStoreLease(performance.now());
    await lease.report(5_000, [{ workerId: 6, lastTimestamp: 4_000 }]);
    expect(lease.renewed).toEqual(["5=5000,6=4000"]);
    await lease.release(6_000);
  });

  it("raises every held id to the clock's now on a release without a final timestamp", async () => {
    const clock = new ManualClock(50_000);
    const raised = new FakeStoreLease(performance.now(), clock);
    await raised.release();
    expect(raised.releases).toEqual(["release undefined 5=50000,6=50000"]);
    const final = new FakeStoreLease(performance.now(), clock);
    await final.release(7_000);
    expect(final.releases).toEqual(["release 7000 5=7000,6=900"]);
    // Without a clock (the store records the release time itself) the timestamps stay as reported.
    const unclocked = new FakeStoreLease(performance.now());
    await unclocked.release();
    expect(unclocked.releases).toEqual(["release undefined 5=1000,6=900"]);
  });

  it("writes no release for a lease already lost", async () => {
    const lease = new FakeStoreLease(performance.now(), new ManualClock());
    lease.abandon("the registry was closed");
    await lease.release();
    expect(lease.releases).toEqual([]);
  });

  it("abandon loses the lease and stops its timers", async () => {
    const lease = new FakeStoreLease(performance.now());
    lease.abandon("the registry was closed");
    expect((lease.lost.reason as Error).message).toContain("the registry was closed");
    expect(vi.getTimerCount()).toBe(0);
    await vi.advanceTimersByTimeAsync(LEASE_MS);
    expect(lease.renewals).toHaveLength(0);
  });
});

describe("checkLeaseTimings", () => {
  it("fills the defaults from leaseMs", () => {
    expect(checkLeaseTimings("registry-test", {}, { leaseMs: 60_000 })).toEqual({
      leaseMs: 60_000,
      safetyMarginMs: 12_000,
      renewIntervalMs: 3000,
    });
    expect(checkLeaseTimings("registry-test", { leaseMs: 1000 }, { leaseMs: 60_000 })).toEqual({
      leaseMs: 1000,
      safetyMarginMs: 200,
      renewIntervalMs: 200,
    });
  });

  it("refuses timings that cannot fence in time, naming the option, the value and what is expected", () => {
    const check = (options: object) => () =>
      checkLeaseTimings("registry-test", options, { leaseMs: 30_000 });
    expect(check({ leaseMs: 499 })).toThrow(
      "[leaf] [registry-test] invalid leaseMs: 499; expected at least 500 ms",
    );
    expect(check({ leaseMs: 1.5 })).toThrow(
      "invalid leaseMs: 1.5; expected a positive integer of ms",
    );
    expect(check({ leaseMs: 1000, safetyMarginMs: 1000 })).toThrow(
      "invalid safetyMarginMs: 1000; expected less than leaseMs (1000)",
    );
    expect(check({ safetyMarginMs: -1 })).toThrow(/invalid safetyMarginMs: -1/);
    expect(check({ leaseMs: 1000, safetyMarginMs: 200, renewIntervalMs: 800 })).toThrow(
      "invalid renewIntervalMs: 800; expected less than leaseMs - safetyMarginMs (800), so a lease is renewed before it fences",
    );
    try {
      check({ renewIntervalMs: "3s" })();
      expect.unreachable();
    } catch (error) {
      expect(error).toMatchObject({
        code: ErrorCodes.INVALID_CONFIG,
        details: { key: "renewIntervalMs" },
      });
    }
  });
});
