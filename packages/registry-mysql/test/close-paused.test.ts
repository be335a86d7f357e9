// Closing while the MariaDB server is SIGSTOPped with a renewal or a timestamp report in flight: the
// release, the SnowflakeWorker's close and the registry's close end while the server is still
// stopped (the registry's statements have a time limit; the pool's end must not wait for a
// statement the server never answers), a release that got no answer is not reported as done, and a
// worker started once the server runs again issues no id the first one issued.
import { mkdtemp } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ErrorCodes, isLeafError, layouts, SnowflakeWorker } from "@leaf/core";
import {
  countDuplicates,
  type MysqlHandle,
  settlesWhilePaused,
  startMysql,
  stopAll,
} from "@leaf/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createSchema, MysqlRegistry, type MysqlRegistryOptions } from "../src/index";
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

let mysql: MysqlHandle;
let db: string;
let cacheRoot: string;
let services = 0;

beforeAll(async () => {
  mysql = await startMysql({ useEnv: false });
  db = await mysql.createDatabase("leaf_close_paused");
  await createSchema(mysql.urlFor(db), { mode: "lease" });
  await createSchema(mysql.urlFor(db), { mode: "fixed" });
  cacheRoot = await mkdtemp(join(tmpdir(), "leaf-close-paused-"));
}, 120_000);

afterAll(async () => {
  if (mysql?.running) mysql.resume();
  await stopAll();
});

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

function registryOf(mode: "fixed" | "lease", extra: Partial<MysqlRegistryOptions> = {}) {
  return mode === "lease"
    ? new MysqlRegistry({ mode, url: mysql.urlFor(db), ...TIMINGS, ...extra })
    : new MysqlRegistry({
        mode,
        url: mysql.urlFor(db),
        queryTimeoutMs: TIMINGS.queryTimeoutMs,
        cacheDir: join(cacheRoot, "cache"),
        ...extra,
      });
}

/**
 * A worker issuing ids until stopped: lease mode on the one-worker layout (the next worker of the
 * service can only get the same id), fixed mode on Leaf's (its id is its ip:port's row).
 */
async function runWorker(mode: "fixed" | "lease", service: string) {
  const registry = registryOf(mode);
  const worker = new SnowflakeWorker({
    registry,
    node: { name: service, ip: "10.7.0.1", port: 8080 },
    layout: mode === "lease" ? ONE_WORKER : layouts.leaf,
    reportIntervalMs: 300,
    firstReportDelayMs: 300,
  });
  // Lease mode: a renewal sent while the server was stopped may run once it runs again, and hold
  // the id for one more lease (10 s): the next worker waits for it.
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

/** The code of a rejection, "resolved" for a fulfilled promise. */
function outcomeOf(result: PromiseSettledResult<unknown>): string {
  if (result.status === "fulfilled") return "resolved";
  return isLeafError(result.reason) ? result.reason.code : String(result.reason);
}

describe.each(["lease", "fixed"] as const)("%s mode while MariaDB is SIGSTOPped", (mode) => {
  it("lets the worker and the registry close with a report in flight; the release is not claimed; no id twice after", async () => {
    const service = `close${services++}`;
    const first = await runWorker(mode, service);
    await sleep(1_000);
    mysql.pause();
    // Reports every 300 ms (and lease mode's renewals every 500 ms) go unanswered from here on.
    await sleep(700);
    await first.stop();
    const closing = settlesWhilePaused(
      mysql,
      (async () => {
        const worker = await first.worker.close().then(
          () => "resolved",
          (error: unknown) => (isLeafError(error) ? error.code : String(error)),
        );
        await first.registry.close();
        return worker;
      })(),
      PAUSED_MS,
    );
    const { whilePaused, result, settledAfterMs } = await closing;
    console.log(`${mode}: worker and registry closed ${settledAfterMs} ms after the call`);
    expect(whilePaused).toBe(true);
    // The release's statements got no answer: the release is not reported as done.
    expect(result).toEqual({ status: "fulfilled", value: ErrorCodes.UNAVAILABLE });
    // The server runs again: a worker of the same service (lease mode: the one id; fixed mode: the
    // same ip:port's row) issues nothing the first issued.
    const second = await runWorker(mode, service);
    try {
      await sleep(1_500);
    } finally {
      await second.stop();
      await second.worker.close();
      await second.registry.close();
    }
    const count = countDuplicates([first.ids, second.ids]);
    console.log(
      `${mode}: ${first.ids.length} + ${second.ids.length} ids, ${count.duplicates} twice`,
    );
    expect(first.ids.length).toBeGreaterThan(0);
    expect(second.ids.length).toBeGreaterThan(0);
    expect(count.duplicates).toBe(0);
  }, 180_000);

  it("rejects a release sent behind an unanswered report as UNAVAILABLE, and closes", async () => {
    const registry = registryOf(mode);
    const lease = await registry.acquire({
      node: { name: `close${services++}`, ip: "10.7.0.3", port: 8080 },
      maxWorkerId: layouts.leaf.maxWorkerId,
    });
    mysql.pause();
    const reporting = lease.report(Date.now()).then(
      () => "resolved",
      (error: unknown) => (isLeafError(error) ? error.code : String(error)),
    );
    await sleep(300);
    const { whilePaused, result, settledAfterMs } = await settlesWhilePaused(
      mysql,
      (async () => {
        const released = await lease.release(Date.now()).then(
          () => "resolved",
          (error: unknown) => (isLeafError(error) ? error.code : String(error)),
        );
        await registry.close();
        return released;
      })(),
      PAUSED_MS,
    );
    console.log(`${mode}: release refused and registry closed ${settledAfterMs} ms after the call`);
    expect(whilePaused).toBe(true);
    expect(result).toEqual({ status: "fulfilled", value: ErrorCodes.UNAVAILABLE });
    // The report waited its time limit while the server was stopped: refused.
    expect(await reporting).toBe(ErrorCodes.UNAVAILABLE);
  }, 120_000);

  it("lets the registry close with a report in flight and the lease held (no release)", async () => {
    const registry = registryOf(mode);
    const lease = await registry.acquire({
      node: { name: `close${services++}`, ip: "10.7.0.2", port: 8080 },
      maxWorkerId: layouts.leaf.maxWorkerId,
    });
    mysql.pause();
    const reporting = lease.report(Date.now()).then(
      () => "resolved",
      (error: unknown) => (isLeafError(error) ? error.code : String(error)),
    );
    await sleep(300);
    const { whilePaused, result, settledAfterMs } = await settlesWhilePaused(
      mysql,
      registry.close(),
      PAUSED_MS,
    );
    console.log(`${mode}: registry closed ${settledAfterMs} ms after the call`);
    expect(whilePaused).toBe(true);
    expect(outcomeOf(result)).toBe("resolved");
    // The lease is lost: nothing keeps another process off its id. The report was left to its
    // own time limit: refused, or answered once the server ran again (within that limit).
    expect(lease.lost.aborted).toBe(true);
    expect(["resolved", ErrorCodes.UNAVAILABLE, ErrorCodes.LEASE_LOST]).toContain(await reporting);
  }, 120_000);
});
