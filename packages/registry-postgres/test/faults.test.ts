// The registry under real faults, every id of both holders counted: the holder (its own process,
// one-worker layout) loses PostgreSQL (the server SIGSTOPped past the lease; its link cut by a TCP
// proxy), or its wall clock steps forward before its link is cut; a second node is granted the id
// and issues past every timestamp the first could reach. A second holder racing a live one waits
// until the first's lease ends. A standby is refused.
import { fileURLToPath } from "node:url";
import { ErrorCodes, isLeafError, SnowflakeWorker } from "@leaf/core";
import {
  ChildLines,
  type ClockStepHandOver,
  clockStepHandOver,
  countRepeatedIds,
  IdLog,
  type PostgresHandle,
  type PostgresReplicaPair,
  spawnNode,
  started,
  startPostgres,
  startPostgresReplicaPair,
  stopAll,
  type TcpProxy,
} from "@leaf/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createSchema, PostgresRegistry } from "../src/index";
import { ONE_WORKER } from "./one-worker";

const HOLDER = fileURLToPath(new URL("./fixtures/holder.ts", import.meta.url));
/** A short lease: fence at 2,000 ms after the last renewal, renew every 500 ms. */
const timings = { leaseMs: 2500, safetyMarginMs: 500, renewIntervalMs: 500, queryTimeoutMs: 1000 };

let postgres: PostgresHandle;
let db: string;
let services = 0;

beforeAll(async () => {
  postgres = await startPostgres({ useEnv: false });
  db = await postgres.createDatabase("leaf_registry_faults");
  await createSchema(postgres.urlFor(db));
});

afterAll(() => stopAll());

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/**
 * The hand-over: the first holder reaches PostgreSQL through a proxy, `stepMs` of clock step, then
 * the fault: its link cut, or (`pauseServer`) the server SIGSTOPped past the lease and resumed; a
 * second node (this process, direct) is granted the one id and issues. With the server paused, the
 * second node starts asking during the pause (its statements wait in the server's socket, under a
 * long statement limit) and is first in line when the server runs again: had the first not fenced,
 * it would still be issuing then.
 */
async function handOver(stepMs: number, pauseServer = false): Promise<ClockStepHandOver> {
  const service = `faults${services++}`;
  const registry = new PostgresRegistry({
    url: postgres.urlFor(db),
    ...timings,
    ...(pauseServer ? { queryTimeoutMs: 20_000 } : {}),
    // A renewal stored between a step and the cut puts the horizon in this clock's future.
    toleranceMs: stepMs + 5000,
  });
  const second = () =>
    untilAnswered(
      () =>
        new SnowflakeWorker({
          registry,
          node: { name: service, ip: "10.4.0.2", port: 8080 },
          layout: ONE_WORKER,
          reacquire: false,
          generator: { randomSequenceStart: 0 },
          startToleranceMs: stepMs + 5000,
          reportIntervalMs: 300,
          restartMarginMs: 200,
          firstReportDelayMs: 50,
        }),
    );
  let early: Promise<SnowflakeWorker> | undefined;
  let held: TcpProxy | undefined;
  try {
    return await clockStepHandOver({
      storePort: postgres.port,
      spawnFirst: (address, env) =>
        spawnNode(
          HOLDER,
          [`postgres://postgres@${address}/${db}`, service, JSON.stringify(timings)],
          { env },
        ),
      startSecond: async () => {
        const pending = early ?? second();
        early = undefined;
        const worker = await pending;
        // Half a second of both issuing, had the first not fenced.
        const link = held;
        setTimeout(() => link?.resume(), 500);
        return worker;
      },
      timestampOf: (id) => ONE_WORKER.decompose(id).timestampMs,
      leaseMs: timings.leaseMs,
      stepMs,
      // The link is cut right after a step: a renewal in between would store the stepped clock
      // (the holders' timers run in step with the test's, so a longer gap can hold one every run).
      cutAfterMs: 1,
      fault: pauseServer
        ? async (proxy) => {
            // The first holder's statements are held on its link until the second is granted: a
            // renewal it gave up on during the pause would otherwise still run once the server
            // does, and keep the id for it.
            held = proxy;
            proxy.pause();
            postgres.pause();
            try {
              early = second();
              early.catch(() => {});
              await sleep(timings.leaseMs + 1500);
            } finally {
              postgres.resume();
            }
          }
        : undefined,
      secondMinMs: 3000,
    });
  } finally {
    held?.resume();
    await early?.then((worker) => worker.close()).catch(() => {});
    await registry.close();
  }
}

/**
 * Starts a worker, again while PostgreSQL does not answer (it may still be catching up right
 * after a resume).
 */
async function untilAnswered(make: () => SnowflakeWorker): Promise<SnowflakeWorker> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    try {
      return await started(make());
    } catch (error) {
      if (!isLeafError(error, ErrorCodes.UNAVAILABLE) || Date.now() > deadline) throw error;
      await sleep(50);
    }
  }
}

function expectNoRepeats(result: ClockStepHandOver): void {
  // The fault happened: both issued ids.
  expect(result.firstIds).toBeGreaterThan(1000);
  expect(result.secondIds).toBeGreaterThan(1000);
  expect(
    result.duplicates,
    `${result.duplicates} of ${result.firstIds + result.secondIds} ids issued twice`,
  ).toBe(0);
  expect(result.firstMaxTimestamp).toBeLessThan(result.secondMinTimestamp);
  expect(result.refusals).toContain("LEASE_LOST");
}

describe("registry-postgres under faults", () => {
  it("fences a holder whose PostgreSQL is SIGSTOPped past the lease before a second node is granted its id", async () => {
    const result = await handOver(0, true);
    expectNoRepeats(result);
  });

  it("fences a holder cut off from PostgreSQL while other nodes still reach it, before they can take its id", async () => {
    const result = await handOver(0);
    expectNoRepeats(result);
  });

  it("issues no id past the stored horizon when the holder's clock steps forward and its link is cut", async () => {
    const stepMs = 10_000;
    const result = await handOver(stepMs);
    // The first holder read the stepped clock.
    expect(result.firstClockMax).toBeGreaterThan(result.cutAt + stepMs / 2);
    expectNoRepeats(result);
  });

  it("keeps a second holder waiting while the first's lease lives, and hands it the id only after the first stopped", async () => {
    const service = `faults${services++}`;
    const url = postgres.urlFor(db);
    const spawn = (ip: string) =>
      // A batch a millisecond: both issue for seconds, and every id is kept.
      new ChildLines(spawnNode(HOLDER, [url, service, JSON.stringify(timings), ip, "1"]));
    const first = spawn("10.4.1.1");
    let second: ChildLines | undefined;
    try {
      await first.until((lines) => lines.some((l) => l.includes('"started"')), "the first holder");
      second = spawn("10.4.1.2");
      await second.until(
        (lines) => lines.some((l) => l.includes('"waiting"')),
        "the second to wait",
      );
      // Several lease lengths of the second asking while the first renews.
      await sleep(3 * timings.leaseMs);
      const grantedWhileHeld = second.lines.some((l) => l.includes('"started"'));
      await first.kill();
      await second.until(
        (lines) => lines.some((l) => l.includes('"started"')),
        "the second holder",
        30_000,
      );
      await sleep(2000);
      await second.kill();
      const logs = [first, second].map((holder) => {
        const log = new IdLog();
        for (const line of holder.json<{ ids?: string[] }>()) {
          for (const id of line.ids ?? []) log.push(BigInt(id));
        }
        return log;
      });
      expect(logs[0]!.count).toBeGreaterThan(1000);
      expect(logs[1]!.count).toBeGreaterThan(1000);
      const counted = countRepeatedIds(logs);
      expect(counted.duplicates, `${counted.duplicates} of ${counted.total} ids issued twice`).toBe(
        0,
      );
      expect(grantedWhileHeld).toBe(false);
    } finally {
      await first.kill();
      await second?.kill();
    }
  });
});

describe("registry-postgres on a standby", () => {
  let pair: PostgresReplicaPair;
  let pairDb: string;

  beforeAll(async () => {
    pair = await startPostgresReplicaPair();
    pairDb = await pair.primary.createDatabase("leaf_registry_standby");
    await createSchema(pair.primary.urlFor(pairDb));
    await pair.waitForReplica();
  });

  afterAll(() => pair.dispose());

  it("refuses to lease from a standby, naming pg_is_in_recovery(), and leases once it is promoted", async () => {
    const registry = new PostgresRegistry({ url: pair.replica.urlFor(pairDb), ...timings });
    const node = { name: "standby", ip: "10.4.2.1", port: 8080 };
    try {
      const error = await registry.acquire({ node, maxWorkerId: 3 }).catch((e: unknown) => e);
      expect(isLeafError(error, ErrorCodes.UNAVAILABLE)).toBe(true);
      expect((error as Error).message).toContain("pg_is_in_recovery() is true");
      expect((error as Error).message).toContain("Point url at the primary");
      await pair.promoteReplica();
      const lease = await registry.acquire({ node, maxWorkerId: 3 });
      expect(lease.workerId).toBe(0);
      await lease.release();
    } finally {
      await registry.close();
    }
  });
});
