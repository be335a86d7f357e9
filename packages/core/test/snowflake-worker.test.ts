import { started } from "@leaf/testkit";
import { describe, expect, it } from "vitest";
import {
  ErrorCodes,
  ManualClock,
  MemoryRegistry,
  MemoryRegistryStore,
  SnowflakeWorker,
  type SnowflakeWorkerEvent,
  type WorkerIdRegistry,
  type WorkerLease,
} from "../src/index";

const node = { name: "orders", ip: "10.1.2.3", port: 8080 };

async function seed(store: MemoryRegistryStore, timestamp: number) {
  const registry = new MemoryRegistry({ store });
  const lease = await registry.acquire({ node, maxWorkerId: 1023 });
  await lease.release(timestamp);
  return lease.workerId;
}

describe("SnowflakeWorker", () => {
  it("touches no registry until started, refuses ids before it, starts once however often asked", async () => {
    const store = new MemoryRegistryStore();
    let acquires = 0;
    const inner = new MemoryRegistry({ store });
    const registry: WorkerIdRegistry = {
      kind: "counting",
      acquire: (request) => {
        acquires++;
        return inner.acquire(request);
      },
      close: () => inner.close(),
    };
    const worker = new SnowflakeWorker({ registry, node });
    expect(acquires).toBe(0);
    expect(() => worker.nextId()).toThrow(
      expect.objectContaining({ code: ErrorCodes.NOT_INITIALIZED }),
    );
    expect(worker.state).toBe("fenced");
    await Promise.all([worker.start(), worker.start()]);
    await worker.start();
    expect(acquires).toBe(1);
    expect(worker.state).toBe("held");
    expect(typeof worker.nextId()).toBe("bigint");
    await worker.close();
    await expect(worker.start()).rejects.toMatchObject({ code: ErrorCodes.CLOSED });
  });

  it("releases the lease a start in flight takes when closed meanwhile", async () => {
    const store = new MemoryRegistryStore();
    const worker = new SnowflakeWorker({ registry: new MemoryRegistry({ store }), node });
    const starting = worker.start();
    await worker.close();
    await starting;
    expect(worker.state).toBe("closed");
    expect(store.spaces.get(node.name)?.get(worker.lease!.workerId)?.holder).toBeUndefined();
  });

  it("refuses to start when the clock is behind the lease's last timestamp, with both times", async () => {
    const store = new MemoryRegistryStore();
    const clock = new ManualClock(Date.UTC(2026, 0, 1));
    await seed(store, clock.now() + 60_000);
    const start = started(
      new SnowflakeWorker({ registry: new MemoryRegistry({ store }), node, clock }),
    );
    await expect(start).rejects.toMatchObject({ code: ErrorCodes.CLOCK_BEHIND_LEASE });
    await expect(start).rejects.toThrow(
      /2026-01-01T00:00:00.000Z.*60000 ms behind.*2026-01-01T00:01:00.000Z/,
    );
    // The refused lease was given back: a correct clock can take the id.
    clock.advance(61_000);
    const worker = await started(
      new SnowflakeWorker({
        registry: new MemoryRegistry({ store }),
        node,
        clock,
        // The start waits until the stored timestamp + one report period + margin: keep it short.
        reportIntervalMs: 20,
        restartMarginMs: 0,
      }),
    );
    expect(worker.state).toBe("held");
    await worker.close();
  });

  it("waits out a clock that is behind the lease by less than the tolerance", async () => {
    const store = new MemoryRegistryStore();
    const clock = new ManualClock(Date.UTC(2026, 0, 1));
    await seed(store, clock.now() + 3);
    const worker = await started(
      new SnowflakeWorker({
        registry: new MemoryRegistry({ store }),
        node,
        clock,
        reportIntervalMs: 20,
        restartMarginMs: 0,
      }),
    );
    const first = worker.generator.decode(worker.nextId());
    expect(first.timestampMs).toBeGreaterThan(Date.UTC(2026, 0, 1) + 3);
    await worker.close();
  });

  it("reports the generator's timestamp periodically and on close", async () => {
    const store = new MemoryRegistryStore();
    const events: SnowflakeWorkerEvent[] = [];
    const worker = await started(
      new SnowflakeWorker({
        registry: new MemoryRegistry({ store }),
        node,
        firstReportDelayMs: 10,
        reportIntervalMs: 20,
        onEvent: (e) => events.push(e),
      }),
    );
    await new Promise((resolve) => setTimeout(resolve, 120));
    expect(events.filter((e) => e.type === "reported").length).toBeGreaterThanOrEqual(2);
    expect(worker.lastReportAt).toBeGreaterThan(0);
    const last = worker.generator.decode(worker.nextId());
    const workerId = worker.lease!.workerId;
    await worker.close();
    expect(worker.state).toBe("closed");
    expect(store.spaces.get("orders")!.get(workerId)!.lastTimestamp).toBeGreaterThanOrEqual(
      last.timestampMs,
    );
  });

  it("fences the generator the moment the lease is lost, then takes a new lease", async () => {
    const store = new MemoryRegistryStore();
    const events: string[] = [];
    const worker = await started(
      new SnowflakeWorker({
        registry: new MemoryRegistry({ store }),
        node,
        // The new lease starts a report period + margin after the start's report: kept short.
        reportIntervalMs: 20,
        restartMarginMs: 10,
        onEvent: (e) => events.push(e.type),
      }),
    );
    const before = worker.nextId();
    store.revoke("orders", worker.lease!.workerId, "test");
    expect(worker.state).toBe("fenced");
    expect(() => worker.nextId()).toThrow(/lease lost/);
    await new Promise((resolve) => setTimeout(resolve, 150));
    expect(worker.state).toBe("held");
    expect(worker.nextId() > before).toBe(true);
    expect(events.filter((type) => type.startsWith("lease-"))).toEqual([
      "lease-acquired",
      "lease-lost",
      "lease-acquired",
    ]);
    await worker.close();
  });

  it("asks the registry for its requested worker id at start and again after a lost lease", async () => {
    const store = new MemoryRegistryStore();
    const other = await new MemoryRegistry({ store }).acquire({ node, maxWorkerId: 1023 });
    expect(other.workerId).toBe(0);
    const worker = await started(
      new SnowflakeWorker({
        registry: new MemoryRegistry({ store }),
        node,
        workerId: 7,
        reportIntervalMs: 20,
        restartMarginMs: 10,
      }),
    );
    expect(worker.lease!.workerId).toBe(7);
    expect(worker.generator.decode(worker.nextId()).workerId).toBe(7);
    const taken = new SnowflakeWorker({
      registry: new MemoryRegistry({ store }),
      node: { ...node, port: 8081 },
      workerId: 7,
    });
    await expect(taken.start()).rejects.toMatchObject({ code: ErrorCodes.WORKER_ID_IN_USE });
    store.revoke("orders", 7, "test");
    await new Promise((resolve) => setTimeout(resolve, 150));
    expect(worker.state).toBe("held");
    expect(worker.lease!.workerId).toBe(7);
    await worker.close();
    await other.release();
  });

  it("close() fences first, waits for the report in flight, then releases with a timestamp covering every id issued", async () => {
    const clock = new ManualClock(Date.UTC(2026, 0, 1));
    const inner = new MemoryRegistry();
    let reportStarted!: () => void;
    const reportBegan = new Promise<void>((resolve) => {
      reportStarted = resolve;
    });
    let openGate!: () => void;
    const gate = new Promise<void>((resolve) => {
      openGate = resolve;
    });
    let released: number | undefined;
    let reports = 0;
    // A registry whose reports hang until the test lets them through (all but the start's, which
    // the worker awaits before ids flow: a lease without a horizon).
    const registry: WorkerIdRegistry = {
      kind: "gated",
      async acquire(request) {
        const lease = await inner.acquire(request);
        const gated: WorkerLease = {
          workerId: lease.workerId,
          lastTimestamp: lease.lastTimestamp,
          backups: lease.backups,
          lost: lease.lost,
          async report(timestampMs, backups) {
            if (reports++ > 0) {
              reportStarted();
              await gate;
            }
            await lease.report(timestampMs, backups);
          },
          async release(finalTimestampMs) {
            released = finalTimestampMs;
            await lease.release(finalTimestampMs);
          },
        };
        return gated;
      },
      close: () => inner.close(),
    };
    const worker = await started(
      new SnowflakeWorker({ registry, node, clock, firstReportDelayMs: 1 }),
    );
    const issued = [worker.nextId()];
    await reportBegan;
    const closing = worker.close();
    // While close() waits for the report in flight, the clock moves on and callers keep asking.
    clock.advance(50);
    const error = (() => {
      try {
        issued.push(worker.nextId());
        return undefined;
      } catch (e) {
        return e;
      }
    })();
    expect(error).toMatchObject({ code: ErrorCodes.CLOSED });
    openGate();
    await closing;
    const newest = Math.max(...issued.map((id) => worker.generator.decode(id).timestampMs));
    expect(released).toBeGreaterThanOrEqual(newest);
  });

  it("refuses ids after close", async () => {
    const worker = await started(new SnowflakeWorker({ registry: new MemoryRegistry(), node }));
    await worker.close();
    await worker.close();
    expect(() => worker.nextId()).toThrow(/closed/);
  });

  it("issues increasing batches itself, and says fenced while its generator is fenced", async () => {
    const worker = await started(new SnowflakeWorker({ registry: new MemoryRegistry(), node }));
    try {
      const sync = worker.nextIds(5_000);
      const chunked = await worker.nextIdsAsync(10_000, 1_000);
      const all = [...sync, ...chunked];
      expect(new Set(all).size).toBe(all.length);
      for (let i = 1; i < all.length; i++) expect(all[i]! > all[i - 1]!).toBe(true);
      expect(worker.state).toBe("held");
      // The lease is still held, but the generator refuses ids (as past its lease's fenceAt).
      worker.generator.fence();
      expect(worker.state).toBe("fenced");
      expect(() => worker.nextIds(1)).toThrow(/lease lost/);
      await expect(worker.nextIdsAsync(1)).rejects.toMatchObject({ code: ErrorCodes.LEASE_LOST });
    } finally {
      await worker.close();
    }
    expect(worker.state).toBe("closed");
  });
});
