// Closing a registry while its database server is SIGSTOPped with a renewal or a timestamp report
// in flight: the release, the SnowflakeWorker's close and the registry's close end while the
// server is still stopped (every statement has a time limit; a pool's end must not wait for a
// statement the server never answers), a release that got no answer is not reported as done, and
// a worker started once the server runs again issues no id the first one issued. Run by the
// registries over a database server (registry-mysql, registry-postgres) with their test kit's
// pause and resume. Exported from `@leaf/conformance/registry`.
import {
  ErrorCodes,
  isLeafError,
  type Layout,
  layouts,
  type NodeIdentity,
  SnowflakeWorker,
  type WorkerIdRegistry,
} from "@leaf/core";
import { expectTrue, type TestFunction } from "./shared";

/** What {@link ClosePausedOptions.settleWhilePaused} answers. */
export interface PausedOutcome<T> {
  /** Whether the promise settled before the server was resumed. */
  whilePaused: boolean;
  result: PromiseSettledResult<T>;
  settledAfterMs: number;
}

/** Options of {@link registryClosePausedConformance}. */
export interface ClosePausedOptions {
  /** Name shown in front of every test, e.g. "registry-mysql (lease mode)". */
  name: string;
  /** A NEW registry instance on the one shared database (another node or process). */
  create: () => WorkerIdRegistry;
  /**
   * The identity of the workers of `service` in test `index` (0 to 2; a registry that keys its
   * rows by address gives each test its own). The second worker of test 0 must be able to get only
   * the id (or row) its first worker held, so that the test hands exactly that one over.
   */
  node: (service: string, index: number) => NodeIdentity;
  /**
   * The layout of the workers: one with a single worker id when the registry leases any free one.
   */
  layout: Layout;
  /** Stops the database server (SIGSTOP). */
  pause: () => void;
  /**
   * Waits for `promise` while the server is stopped, up to far past every time limit of the
   * registry, then resumes the server (SIGCONT) and waits for the promise in any case (the test
   * kit's `settlesWhilePaused`).
   */
  settleWhilePaused: <T>(promise: Promise<T>) => Promise<PausedOutcome<T>>;
  /** Per-test time limit in ms (default 180,000). */
  timeoutMs?: number;
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** The code a promise rejects with, "resolved" when it resolves. */
function outcome(promise: Promise<unknown>): Promise<string> {
  return promise.then(
    () => "resolved",
    (error: unknown) => (isLeafError(error) ? error.code : String(error)),
  );
}

/** Registers the three close-while-paused tests with vitest's `test`. */
export function registryClosePausedConformance(
  test: TestFunction,
  options: ClosePausedOptions,
): void {
  const timeoutMs = options.timeoutMs ?? 180_000;
  let services = 0;
  const service = () => `close${services++}${Date.now().toString(36)}`;

  /** A worker issuing ids until stopped. */
  async function runWorker(name: string) {
    const registry = options.create();
    const worker = new SnowflakeWorker({
      registry,
      node: options.node(name, 0),
      layout: options.layout,
      reportIntervalMs: 300,
      firstReportDelayMs: 300,
    });
    // A renewal sent while the server was stopped may run once it runs again, and hold the id for
    // one more lease: the next worker waits for it.
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

  /** A lease of a new registry, with a report sent once the server is stopped. */
  async function leaseWithReportInFlight(index: number) {
    const registry = options.create();
    const lease = await registry.acquire({
      node: options.node(service(), index),
      maxWorkerId: layouts.leaf.maxWorkerId,
    });
    options.pause();
    const reporting = outcome(lease.report(Date.now()));
    await sleep(300);
    return { registry, lease, reporting };
  }

  test(
    `${options.name}: lets the worker and the registry close with a report in flight; the release is not claimed; no id twice after`,
    async () => {
      const name = service();
      const first = await runWorker(name);
      await sleep(1_000);
      options.pause();
      // Reports every 300 ms (and renewals) go unanswered from here on.
      await sleep(700);
      await first.stop();
      const { whilePaused, result, settledAfterMs } = await options.settleWhilePaused(
        (async () => {
          const worker = await outcome(first.worker.close());
          await first.registry.close();
          return worker;
        })(),
      );
      console.log(
        `${options.name}: worker and registry closed ${settledAfterMs} ms after the call`,
      );
      expectTrue(whilePaused, `the close took ${settledAfterMs} ms: it waited for the server`);
      // The release's statements got no answer: the release is not reported as done.
      expectTrue(
        result.status === "fulfilled" && result.value === ErrorCodes.UNAVAILABLE,
        `the worker's close answered ${JSON.stringify(result)}, expected ${ErrorCodes.UNAVAILABLE}`,
      );
      // The server runs again: a worker of the same service issues nothing the first issued.
      const second = await runWorker(name);
      try {
        await sleep(1_500);
      } finally {
        await second.stop();
        await second.worker.close();
        await second.registry.close();
      }
      const seen = new Set<bigint>(first.ids);
      const twice = second.ids.filter((id) => seen.has(id)).length;
      console.log(
        `${options.name}: ${first.ids.length} + ${second.ids.length} ids, ${twice} twice`,
      );
      expectTrue(first.ids.length > 0, "the first worker issued no id");
      expectTrue(second.ids.length > 0, "the second worker issued no id");
      expectTrue(twice === 0, `${twice} ids of the second worker were issued by the first`);
    },
    timeoutMs,
  );

  test(
    `${options.name}: rejects a release sent behind an unanswered report as UNAVAILABLE, and closes`,
    async () => {
      const { registry, lease, reporting } = await leaseWithReportInFlight(1);
      const { whilePaused, result, settledAfterMs } = await options.settleWhilePaused(
        (async () => {
          const released = await outcome(lease.release(Date.now()));
          await registry.close();
          return released;
        })(),
      );
      console.log(`${options.name}: release refused, registry closed after ${settledAfterMs} ms`);
      expectTrue(whilePaused, `the close took ${settledAfterMs} ms: it waited for the server`);
      expectTrue(
        result.status === "fulfilled" && result.value === ErrorCodes.UNAVAILABLE,
        `the release answered ${JSON.stringify(result)}, expected ${ErrorCodes.UNAVAILABLE}`,
      );
      // The report waited its time limit while the server was stopped: refused.
      const reported = await reporting;
      expectTrue(
        reported === ErrorCodes.UNAVAILABLE,
        `the report answered ${reported}, expected ${ErrorCodes.UNAVAILABLE}`,
      );
    },
    timeoutMs,
  );

  test(
    `${options.name}: lets the registry close with a report in flight and the lease held (no release)`,
    async () => {
      const { registry, lease, reporting } = await leaseWithReportInFlight(2);
      const { whilePaused, result, settledAfterMs } = await options.settleWhilePaused(
        registry.close(),
      );
      console.log(`${options.name}: registry closed ${settledAfterMs} ms after the call`);
      expectTrue(whilePaused, `the close took ${settledAfterMs} ms: it waited for the server`);
      expectTrue(result.status === "fulfilled", `the close rejected: ${String(result)}`);
      // The lease is lost: nothing keeps another process off its id. The report was left to its
      // own time limit: refused, or answered once the server ran again (within that limit).
      expectTrue(lease.lost.aborted, "the lease is not reported lost after the close");
      const reported = await reporting;
      expectTrue(
        ["resolved", ErrorCodes.UNAVAILABLE, ErrorCodes.LEASE_LOST].includes(reported),
        `the report answered ${reported}`,
      );
    },
    timeoutMs,
  );
}
