// Closing while the PostgreSQL server is SIGSTOPped with a renewal or a timestamp report in flight
// (the check registry-mysql's close-paused test makes of MariaDB, whose pool end waited for the
// server): the release, the SnowflakeWorker's close and the registry's close end while the server
// is still stopped (every statement and connection attempt has a time limit, and a connection that
// timed out is destroyed), a release that got no answer is not reported as done, and a worker
// started once the server runs again issues no id the first one issued.
import { ErrorCodes, isLeafError, layouts, SnowflakeWorker } from "@leaf/core";
import {
  countDuplicates,
  type PostgresHandle,
  settlesWhilePaused,
  startPostgres,
  stopAll,
} from "@leaf/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createSchema, PostgresRegistry } from "../src/index";
import { ONE_WORKER } from "./one-worker";

/** How long the server stays stopped while the close runs: far past every timeout below (2 s). */
const PAUSED_MS = 30_000;
/** Statements time out after 2 s; a lease lasts 10 s, renewed every 500 ms. */
const TIMINGS = {
  leaseMs: 10_000,
  safetyMarginMs: 2_000,
  renewIntervalMs: 500,
  queryTimeoutMs: 2_000,
};

let postgres: PostgresHandle;
let db: string;
let services = 0;

beforeAll(async () => {
  postgres = await startPostgres({ useEnv: false });
  db = await postgres.createDatabase("leaf_close_paused");
  await createSchema(postgres.urlFor(db));
}, 120_000);

afterAll(async () => {
  if (postgres?.running) postgres.resume();
  await stopAll();
});

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

const registryOf = () => new PostgresRegistry({ url: postgres.urlFor(db), ...TIMINGS });

/** The code of a rejection, "resolved" for a fulfilled promise. */
const outcome = (promise: Promise<unknown>) =>
  promise.then(
    () => "resolved",
    (error: unknown) => (isLeafError(error) ? error.code : String(error)),
  );

/**
 * A worker issuing ids until stopped, on the one-worker layout: the next worker of the service can
 * only get the same id.
 */
async function runWorker(service: string) {
  const registry = registryOf();
  const worker = new SnowflakeWorker({
    registry,
    node: { name: service, ip: "10.8.0.1", port: 8080 },
    layout: ONE_WORKER,
    reportIntervalMs: 300,
    firstReportDelayMs: 300,
  });
  // A renewal sent while the server was stopped may run once it runs again, and hold the id for
  // one more lease (10 s): the next worker waits for it.
  for (let attempt = 0; ; attempt++) {
    try {
      await worker.start();
      break;
    } catch (error) {
      if (!isLeafError(error, ErrorCodes.WORKER_IDS_EXHAUSTED) || attempt >= 60) throw error;
      await sleep(500);
    }
  }
  const ids: bigint[] = [];
  let running = true;
  const issuing = (async () => {
    while (running) {
      try {
        ids.push(...worker.nextIds(20));
      } catch {
        // Fenced or closed: nothing issued.
      }
      await sleep(1);
    }
  })();
  const stop = async () => {
    running = false;
    await issuing;
  };
  return { registry, worker, ids, stop };
}

describe("PostgresRegistry while PostgreSQL is SIGSTOPped", () => {
  it("lets the worker and the registry close with a report in flight; the release is not claimed; no id twice after", async () => {
    const service = `close${services++}`;
    const first = await runWorker(service);
    await sleep(1_000);
    postgres.pause();
    // Reports every 300 ms and renewals every 500 ms go unanswered from here on.
    await sleep(700);
    await first.stop();
    const { whilePaused, result, settledAfterMs } = await settlesWhilePaused(
      postgres,
      (async () => {
        const worker = await outcome(first.worker.close());
        await first.registry.close();
        return worker;
      })(),
      PAUSED_MS,
    );
    console.log(`worker and registry closed ${settledAfterMs} ms after the call`);
    expect(whilePaused).toBe(true);
    // The release's statement got no answer: the release is not reported as done.
    expect(result).toEqual({ status: "fulfilled", value: ErrorCodes.UNAVAILABLE });
    // The server runs again: a worker of the same service (the one id) issues nothing the first
    // issued.
    const second = await runWorker(service);
    try {
      await sleep(1_500);
    } finally {
      await second.stop();
      await second.worker.close();
      await second.registry.close();
    }
    const count = countDuplicates([first.ids, second.ids]);
    console.log(`${first.ids.length} + ${second.ids.length} ids, ${count.duplicates} twice`);
    expect(first.ids.length).toBeGreaterThan(0);
    expect(second.ids.length).toBeGreaterThan(0);
    expect(count.duplicates).toBe(0);
  }, 180_000);

  it("rejects a release sent behind an unanswered renewal as UNAVAILABLE, and closes", async () => {
    const registry = registryOf();
    const lease = await registry.acquire({
      node: { name: `close${services++}`, ip: "10.8.0.3", port: 8080 },
      maxWorkerId: layouts.leaf.maxWorkerId,
    });
    postgres.pause();
    const reporting = outcome(lease.report(Date.now()));
    await sleep(300);
    const { whilePaused, result, settledAfterMs } = await settlesWhilePaused(
      postgres,
      (async () => {
        const released = await outcome(lease.release(Date.now()));
        await registry.close();
        return released;
      })(),
      PAUSED_MS,
    );
    console.log(`release refused and registry closed ${settledAfterMs} ms after the call`);
    expect(whilePaused).toBe(true);
    expect(result).toEqual({ status: "fulfilled", value: ErrorCodes.UNAVAILABLE });
    // The renewal waited its time limit while the server was stopped: refused.
    expect(await reporting).toBe(ErrorCodes.UNAVAILABLE);
  }, 120_000);

  it("lets the registry close with a renewal in flight and the lease held (no release)", async () => {
    const registry = registryOf();
    const lease = await registry.acquire({
      node: { name: `close${services++}`, ip: "10.8.0.2", port: 8080 },
      maxWorkerId: layouts.leaf.maxWorkerId,
    });
    postgres.pause();
    const reporting = outcome(lease.report(Date.now()));
    await sleep(300);
    const { whilePaused, result, settledAfterMs } = await settlesWhilePaused(
      postgres,
      registry.close(),
      PAUSED_MS,
    );
    console.log(`registry closed ${settledAfterMs} ms after the call`);
    expect(whilePaused).toBe(true);
    expect(result.status).toBe("fulfilled");
    // The lease is lost: nothing keeps another process off its id. The renewal was left to its
    // own time limit: refused, or answered once the server ran again (within that limit).
    expect(lease.lost.aborted).toBe(true);
    expect(["resolved", ErrorCodes.UNAVAILABLE, ErrorCodes.LEASE_LOST]).toContain(await reporting);
  }, 120_000);
});
