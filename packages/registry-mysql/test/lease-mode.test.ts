// Lease mode against a private MariaDB: distinct ids under contention, ids recycled after a holder
// is SIGKILLed (and the next holder's ids above all of its ids, even with its clock running ahead),
// fencing before anyone else may take the id when the holder loses the database (server hung, or a
// partition between that node and the database), and the start check.
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import {
  ErrorCodes,
  isLeafError,
  type LeafError,
  layouts,
  ManualClock,
  SnowflakeWorker,
} from "@leaf/core";
import {
  ChildLines,
  freePort,
  type MysqlHandle,
  spawnNode,
  started,
  startMysql,
  stopAll,
} from "@leaf/testkit";
import { createConnection, type RowDataPacket } from "mysql2/promise";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  createSchema,
  type LeasedLease,
  MysqlRegistry,
  type MysqlRegistryOptions,
} from "../src/index";
import { Blackhole } from "./blackhole";

let mysql: MysqlHandle;
let db: string;
const holderScript = join(import.meta.dirname, "fixtures/holder.ts");
/** A short lease so that recycling can be watched: fence at 2,000 ms, renew every 500 ms. */
const SHORT = { leaseMs: 2500, safetyMarginMs: 500, renewIntervalMs: 500, queryTimeoutMs: 1000 };

beforeAll(async () => {
  mysql = await startMysql({ useEnv: false });
  db = await mysql.createDatabase("leaf_lease");
  await createSchema(mysql.urlFor(db), { mode: "lease" });
});
afterAll(() => stopAll());

let services = 0;
const service = () => `svc${services++}`;
const node = (name: string, i = 1) => ({ name, ip: `10.3.0.${i}`, port: 8080 });

function registry(extra: Partial<MysqlRegistryOptions> = {}, url = mysql.urlFor(db)) {
  return new MysqlRegistry({ mode: "lease", url: url, ...SHORT, ...extra });
}

function holder(settings: Record<string, unknown>): ChildLines {
  const env = {
    HOLDER: JSON.stringify({
      registry: { mode: "lease", url: mysql.urlFor(db), ...SHORT },
      ip: "10.3.9.1",
      port: 8080,
      ...settings,
    }),
  };
  return new ChildLines(spawnNode(holderScript, [], { env }));
}

async function go(children: ChildLines[]) {
  await Promise.all(
    children.map((c) => c.until((lines) => lines.includes('{"ready":true}'), "ready")),
  );
  for (const child of children) child.child.stdin!.write("go\n");
  await Promise.all(
    children.map((c) => c.until((lines) => lines.some((l) => l.includes('"ok"')), "acquire")),
  );
  return children.map((c) => c.json<{ ok: boolean; workerId?: number; code?: string }>()[1]!);
}

/** Acquires, retrying while every id is leased; resolves with the lease and when it was won. */
async function acquireWhenFree(r: MysqlRegistry, name: string, i: number) {
  for (;;) {
    try {
      const lease = await r.acquire({ node: node(name, i), maxWorkerId: 0 });
      return { lease, wonAt: performance.now(), wonAtWall: Date.now() };
    } catch (error) {
      if (
        !isLeafError(error, ErrorCodes.WORKER_IDS_EXHAUSTED) &&
        !isLeafError(error, ErrorCodes.UNAVAILABLE)
      ) {
        throw error;
      }
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }
}

async function leaseRow(name: string, workerId: number) {
  const connection = await createConnection(mysql.connectionOptions(db));
  try {
    const [[row]] = await connection.query<RowDataPacket[]>(
      "SELECT holder, TIMESTAMPDIFF(MICROSECOND, '1970-01-01', lease_until) DIV 1000 AS until_ms " +
        "FROM leaf_worker_lease WHERE leaf_name = ? AND worker_id = ?",
      [name, workerId],
    );
    return row!;
  } finally {
    await connection.end();
  }
}

describe("lease mode", () => {
  it("gives eight processes acquiring at once eight distinct worker ids", async () => {
    const name = service();
    const children = Array.from({ length: 8 }, (_, i) =>
      holder({ name, ip: `10.3.1.${i + 1}`, maxWorkerId: 7 }),
    );
    const outcomes = await go(children);
    expect(outcomes.every((o) => o.ok)).toBe(true);
    expect(outcomes.map((o) => o.workerId).sort()).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
    // A ninth node finds every id leased.
    const error = await registry()
      .acquire({ node: node(name, 99), maxWorkerId: 7 })
      .catch((e: unknown) => e);
    expect(isLeafError(error, ErrorCodes.WORKER_IDS_EXHAUSTED)).toBe(true);
    expect((error as Error).message).toContain("the soonest lease to end is worker id");
    await Promise.all(children.map((c) => c.kill()));
  });

  it("gives a SIGKILLed holder's id back after the lease, and the next holder's ids are above all of its ids, even when its clock ran ahead", async () => {
    const name = service();
    // The old holder's clock runs 5 s ahead, more than the lease: only the horizon it stored with
    // each renewal (its clock + lease - margin) puts the next holder above the ids it issued after
    // its last report.
    const old = holder({ name, maxWorkerId: 0, issue: true, clockOffsetMs: 5000 });
    const [outcome] = await go([old]);
    expect(outcome).toMatchObject({ ok: true, workerId: 0 });
    await old.until((lines) => lines.filter((l) => l.includes('"id"')).length >= 100, "ids");
    await old.kill();
    const issued = old.json<{ id?: string }>().flatMap((l) => (l.id ? [BigInt(l.id)] : []));
    let highest = 0n;
    for (const id of issued) if (id > highest) highest = id;

    const r = registry({ toleranceMs: 10_000 });
    const { lease } = await acquireWhenFree(r, name, 2);
    expect(lease.workerId).toBe(0);
    expect(lease.lastTimestamp).toBeGreaterThanOrEqual(layouts.leaf.decompose(highest).timestampMs);
    await lease.release(0);
    // release(0) keeps the stored timestamp: the worker starts above the old holder's ids.
    const worker = await started(
      new SnowflakeWorker({
        registry: r,
        node: node(name, 2),
        startToleranceMs: 10_000,
      }),
    );
    const first = worker.nextId();
    expect(first > highest).toBe(true);
    await worker.close();
    await r.close();
  });

  it("fences a holder whose database hangs before the database can give its id to another", async () => {
    const name = service();
    const a = registry();
    const lease = await a.acquire({ node: node(name, 1), maxWorkerId: 0 });
    let fencedAt = 0;
    let fencedAtWall = 0;
    lease.lost.addEventListener("abort", () => {
      fencedAt = performance.now();
      fencedAtWall = Date.now();
    });
    // Let a few renewals succeed, then hang the server.
    await new Promise((resolve) => setTimeout(resolve, 1200));
    mysql.pause();
    try {
      await waitUntil(() => lease.lost.aborted, 10_000, "the holder to fence");
    } finally {
      mysql.resume();
    }
    expect(isLeafError(lease.lost.reason, ErrorCodes.LEASE_LOST)).toBe(true);
    expect((lease.lost.reason as LeafError).leafCode).toBe(-4);
    expect((lease.lost.reason as Error).message).toContain("no successful renewal");
    // When it fenced, the lease in the table (judged by the database's clock) still ran.
    const row = await leaseRow(name, 0);
    expect(row.holder).toBe((lease as LeasedLease).token);
    expect(fencedAtWall).toBeLessThan(Number(row.until_ms));
    const { lease: next, wonAt } = await acquireWhenFree(registry(), name, 2);
    expect(next.workerId).toBe(0);
    expect(fencedAt).toBeLessThan(wonAt);
    await next.release();
    await a.close();
  });

  it("fences a holder cut off from the database while other nodes still reach it, before they can take its id", async () => {
    const name = service();
    const proxy = await Blackhole.start(mysql.port);
    const a = registry({}, `mysql://root@127.0.0.1:${proxy.port}/${db}`);
    const worker = await started(
      new SnowflakeWorker({
        registry: a,
        node: node(name, 1),
        reacquire: false,
        reportIntervalMs: 200,
        firstReportDelayMs: 50,
      }),
    );
    const lease = worker.lease!;
    let fencedAt = 0;
    lease.lost.addEventListener("abort", () => {
      fencedAt = performance.now();
    });
    let highest = 0n;
    const issuing = setInterval(() => {
      try {
        for (let i = 0; i < 20; i++) highest = worker.nextId();
      } catch {
        clearInterval(issuing);
      }
    }, 5);
    await new Promise((resolve) => setTimeout(resolve, 1000));
    proxy.cutOff();
    // Another node reaching the database keeps trying; it wins only after the holder fenced.
    const b = registry();
    const { lease: next, wonAt } = await acquireWhenFree(b, name, 2);
    clearInterval(issuing);
    expect(lease.lost.aborted).toBe(true);
    expect(fencedAt).toBeGreaterThan(0);
    expect(fencedAt).toBeLessThan(wonAt);
    expect(() => worker.nextId()).toThrow(/lease lost/);
    expect(next.workerId).toBe(lease.workerId);
    expect(next.lastTimestamp).toBeGreaterThanOrEqual(layouts.leaf.decompose(highest).timestampMs);
    await next.release();
    await worker.close();
    await a.close();
    await b.close();
    await proxy.close();
  });

  it("keeps a lease for several lease lengths while its renewals succeed", async () => {
    const name = service();
    const r = registry({ leaseMs: 1000, safetyMarginMs: 200, renewIntervalMs: 200 });
    const lease = await r.acquire({ node: node(name), maxWorkerId: 0 });
    await new Promise((resolve) => setTimeout(resolve, 3500));
    expect(lease.lost.aborted).toBe(false);
    const error = await registry()
      .acquire({ node: node(name, 2), maxWorkerId: 0 })
      .catch((e: unknown) => e);
    expect(isLeafError(error, ErrorCodes.WORKER_IDS_EXHAUSTED)).toBe(true);
    await lease.release();
    await r.close();
  });

  it("refuses to start when the stored timestamp is ahead of the clock, and gives the id back", async () => {
    const name = service();
    const clock = new ManualClock(Date.now());
    const first = await registry({ clock }).acquire({ node: node(name), maxWorkerId: 3 });
    await first.release(clock.now() + 60_000);
    const r = registry({ clock });
    const error = await r.acquire({ node: node(name), maxWorkerId: 3 }).catch((e: unknown) => e);
    expect(isLeafError(error, ErrorCodes.CLOCK_BEHIND_LEASE)).toBe(true);
    expect((error as Error).message).toContain(new Date(clock.now() + 60_000).toISOString());
    expect((error as Error).message).toContain(new Date(clock.now()).toISOString());
    expect((await leaseRow(name, first.workerId)).holder).toBeNull();
    clock.advance(60_001);
    const lease = await r.acquire({ node: node(name), maxWorkerId: 3 });
    expect(lease.workerId).toBe(first.workerId);
    await lease.release();
    await r.close();
  });

  it("hands a released id to the next node at once, starting after the final timestamp", async () => {
    const name = service();
    const r = registry();
    const first = await r.acquire({ node: node(name, 1), maxWorkerId: 0 });
    const final = Date.now() - 10;
    await first.release(final);
    const next = await r.acquire({ node: node(name, 2), maxWorkerId: 0 });
    expect(next.workerId).toBe(first.workerId);
    expect(next.lastTimestamp).toBe(final);
    await next.release();
    await r.close();
  });

  it("has no local fallback when MySQL cannot be reached, and says why", async () => {
    const port = await freePort();
    const r = registry({}, `mysql://root@127.0.0.1:${port}/${db}`);
    const error = await r
      .acquire({ node: node(service()), maxWorkerId: 3 })
      .catch((e: unknown) => e);
    expect(isLeafError(error, ErrorCodes.UNAVAILABLE)).toBe(true);
    expect((error as Error).message).toContain("ECONNREFUSED");
    expect((error as Error).message).toContain("lease mode has no local fallback");
    await r.close();
  });

  it("takes every backup id or none", async () => {
    const name = service();
    const r = registry();
    const a = await r.acquire({ node: node(name, 1), maxWorkerId: 3, backups: 2 });
    const error = await r
      .acquire({ node: node(name, 2), maxWorkerId: 3, backups: 1 })
      .catch((e: unknown) => e);
    expect(isLeafError(error, ErrorCodes.WORKER_IDS_EXHAUSTED)).toBe(true);
    // The failed acquire took the one free id and gave it back.
    const lone = await r.acquire({ node: node(name, 3), maxWorkerId: 3 });
    expect([a.workerId, ...a.backups.map((b) => b.workerId)]).not.toContain(lone.workerId);
    await a.release();
    await lone.release();
    await r.close();
  });
});

async function waitUntil(check: () => boolean, ms: number, what: string): Promise<void> {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
