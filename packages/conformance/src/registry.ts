// The conformance suite every worker-id registry runs unchanged: ours (zk, mysql, postgres, local,
// redis, etcd) and third parties'. It takes vitest's `test` so that it registers real tests in the
// adapter's own test file. Subpath `@leaf/conformance/registry`.
import {
  type AcquireRequest,
  ErrorCodes,
  isLeafError,
  type NodeIdentity,
  SnowflakeWorker,
  type WorkerIdRegistry,
  type WorkerLease,
} from "@leaf/core";
import {
  type Capability,
  type ConformanceContext,
  expectTrue,
  isUnsupported,
  NOT_DECLARED,
  skipUnsupported,
  type TestFunction,
  type Unsupported,
  uniqueNamespace,
} from "./shared";

export {
  type ClosePausedOptions,
  type PausedOutcome,
  registryClosePausedConformance,
} from "./registry-close-paused";
export type { Capability, ConformanceContext, TestFunction, Unsupported } from "./shared";

/** Options of {@link registryConformance}. */
export interface RegistryConformanceOptions {
  /** Name shown in front of every test, e.g. "registry-zk (recycle mode)". */
  name: string;
  /**
   * Returns a NEW registry instance backed by the SAME storage as every other instance created for
   * this namespace: each instance stands for another node or process.
   */
  create: (context: ConformanceContext) => Promise<WorkerIdRegistry>;
  /** Node identity number `i` (default: service `namespace`, ip 10.0.x.y, port 8080). */
  node?: (i: number, namespace: string) => NodeIdentity;
  /** Largest worker id used by most tests (default 1023, Leaf's 10 bits). */
  maxWorkerId?: number;
  /** Concurrent acquirers in the distinct-ids test (default 8). */
  concurrentAcquirers?: number;
  /** Per-test time limit in ms (default 30,000). */
  timeoutMs?: number;
  /**
   * Running out of ids: with `maxWorkerId` small (default 3), `capacity` nodes (default
   * maxWorkerId + 1; fewer when the registry never grants some ids, as ids from AUTO_INCREMENT that
   * start at 1) each get an id and the next gets WORKER_IDS_EXHAUSTED.
   */
  exhaustion?: Capability<{ maxWorkerId?: number; capacity?: number }>;
  /**
   * Causes `lease` to be lost (session expiry, lease timeout, revocation); the suite awaits `lost`.
   */
  leaseLoss?: Capability<{
    induce: (lease: WorkerLease, context: ConformanceContext) => Promise<void>;
    waitMs?: number;
  }>;
  /** Backup worker ids leased with the primary one. */
  backups?: Capability<true>;
  /** A lone node that releases and acquires again gets the same worker id back (default true). */
  sameIdOnReacquire?: Capability<true>;
  /**
   * Grants a requested worker id (`AcquireRequest.workerId`, e.g. a StatefulSet pod's ordinal)
   * exactly, under a lease, or refuses it with WORKER_ID_IN_USE while another holder has it.
   * Switched off (the default), the suite checks instead that a request naming a worker id is
   * refused with INVALID_ARGUMENT rather than answered with another id.
   */
  requestedWorkerId?: Capability<true>;
}

/** Registers the conformance tests for one registry with vitest's `test`. */
export function registryConformance(test: TestFunction, options: RegistryConformanceOptions): void {
  const timeout = options.timeoutMs ?? 30_000;
  const maxWorkerId = options.maxWorkerId ?? 1023;
  const nodeOf =
    options.node ??
    ((i: number, namespace: string): NodeIdentity => ({
      name: namespace,
      ip: `10.0.${Math.floor(i / 250)}.${(i % 250) + 1}`,
      port: 8080,
    }));

  /** Runs `body` with a fresh namespace; closes every registry it opened, even on failure. */
  const scenario = (title: string, body: (s: Scenario) => Promise<void>) => {
    test(
      `${options.name}: ${title}`,
      async () => {
        const namespace = uniqueNamespace("conf");
        const opened: WorkerIdRegistry[] = [];
        const leases: WorkerLease[] = [];
        const s: Scenario = {
          namespace,
          node: (i) => nodeOf(i, namespace),
          async registry() {
            const r = await options.create({ namespace });
            opened.push(r);
            return r;
          },
          async acquire(registry, i, extra = {}) {
            const lease = await registry.acquire({
              node: nodeOf(i, namespace),
              maxWorkerId,
              ...extra,
            });
            leases.push(lease);
            return lease;
          },
        };
        try {
          await body(s);
        } finally {
          for (const lease of leases) await lease.release().catch(() => {});
          for (const r of opened) await r.close().catch(() => {});
        }
      },
      timeout,
    );
  };
  const skipped = (title: string, reason: Unsupported) =>
    skipUnsupported(test, options.name, title, reason);

  scenario(
    "grants distinct worker ids inside the layout's range to concurrent acquirers",
    async (s) => {
      const n = options.concurrentAcquirers ?? 8;
      const registries = await Promise.all(Array.from({ length: n }, () => s.registry()));
      const leases = await Promise.all(registries.map((r, i) => s.acquire(r, i)));
      const ids = leases.map((l) => l.workerId);
      expectTrue(
        new Set(ids).size === n,
        `expected ${n} distinct worker ids, got ${ids.join(", ")}`,
      );
      for (const id of ids) {
        expectTrue(
          Number.isInteger(id) && id >= 0 && id <= maxWorkerId,
          `worker id ${id} outside 0..${maxWorkerId}`,
        );
      }
      for (const lease of leases) expectTrue(!lease.lost.aborted, "a fresh lease is already lost");
    },
  );

  scenario("does not grant a leased worker id to a second node", async (s) => {
    const a = await s.acquire(await s.registry(), 0);
    const b = await s.acquire(await s.registry(), 1);
    expectTrue(a.workerId !== b.workerId, `both nodes got worker id ${a.workerId}`);
  });

  scenario("keeps the reported timestamp across release and re-acquire", async (s) => {
    const registry = await s.registry();
    const first = await s.acquire(registry, 0);
    const reported = Date.now() - 5_000;
    await first.report(reported);
    const final = Date.now() - 1_000;
    await first.release(final);
    const again = await s.acquire(await s.registry(), 0);
    if (again.workerId === first.workerId) {
      expectTrue(
        again.lastTimestamp >= final,
        `lastTimestamp ${again.lastTimestamp} is below the final report ${final}`,
      );
    } else {
      expectTrue(
        isUnsupported(options.sameIdOnReacquire),
        `a lone node got worker id ${again.workerId} back instead of ${first.workerId}`,
      );
    }
  });

  scenario("never moves a stored timestamp backwards", async (s) => {
    const first = await s.acquire(await s.registry(), 0);
    const high = Date.now() - 2_000;
    await first.report(high);
    await first.report(high - 60_000);
    await first.release();
    const again = await s.acquire(await s.registry(), 0);
    if (again.workerId === first.workerId) {
      expectTrue(
        again.lastTimestamp >= high,
        `stored timestamp went back to ${again.lastTimestamp} from ${high}`,
      );
    }
  });

  scenario(
    "refuses to start a generator when the stored timestamp is ahead of the clock",
    async (s) => {
      const registry = await s.registry();
      const first = await s.acquire(registry, 0);
      const ahead = Date.now() + 3_600_000;
      await first.report(ahead);
      await first.release(ahead);
      let error: unknown;
      try {
        const worker = new SnowflakeWorker({
          registry: await s.registry(),
          node: s.node(0),
        });
        await worker.start();
        await worker.close();
      } catch (e) {
        error = e;
      }
      expectTrue(
        isLeafError(error, ErrorCodes.CLOCK_BEHIND_LEASE),
        `expected CLOCK_BEHIND_LEASE, got ${String(error)}`,
      );
      expectTrue(
        String((error as Error).message).includes(new Date(ahead).toISOString()),
        "the message does not show the stored time",
      );
    },
  );

  scenario(
    "runs a generator under the leased id and reports its timestamps on close",
    async (s) => {
      const worker = new SnowflakeWorker({
        registry: await s.registry(),
        node: s.node(0),
        reportIntervalMs: 200,
        firstReportDelayMs: 50,
      });
      await worker.start();
      const workerId = worker.lease!.workerId;
      const ids = worker.generator.nextIds(1000);
      const decoded = worker.generator.decode(ids[ids.length - 1]!);
      expectTrue(
        decoded.workerId === workerId,
        `ids carry worker id ${decoded.workerId}, lease is ${workerId}`,
      );
      await worker.close();
      const again = await s.acquire(await s.registry(), 0);
      if (again.workerId === workerId) {
        expectTrue(
          again.lastTimestamp >= decoded.timestampMs,
          `after close the stored timestamp ${again.lastTimestamp} is below the last id's ${decoded.timestampMs}`,
        );
      }
    },
  );

  scenario("treats release as idempotent", async (s) => {
    const lease = await s.acquire(await s.registry(), 0);
    await lease.release(Date.now());
    await lease.release(Date.now());
    const other = await s.acquire(await s.registry(), 1);
    expectTrue(Number.isInteger(other.workerId), "acquire after double release failed");
  });

  const exhaustion = options.exhaustion ?? {};
  if (isUnsupported(exhaustion))
    skipped("fails with a clear error when worker ids run out", exhaustion);
  else {
    scenario("fails with a clear error when worker ids run out", async (s) => {
      const max = exhaustion.maxWorkerId ?? 3;
      const capacity = exhaustion.capacity ?? max + 1;
      const registry = await s.registry();
      const held: number[] = [];
      for (let i = 0; i < capacity; i++) {
        const lease = await s.acquire(registry, i, { maxWorkerId: max });
        expectTrue(lease.workerId <= max, `worker id ${lease.workerId} above ${max}`);
        held.push(lease.workerId);
      }
      expectTrue(new Set(held).size === capacity, `ids not distinct: ${held.join(", ")}`);
      let error: unknown;
      try {
        await s.acquire(registry, capacity, { maxWorkerId: max });
      } catch (e) {
        error = e;
      }
      expectTrue(
        isLeafError(error, ErrorCodes.WORKER_IDS_EXHAUSTED),
        `expected WORKER_IDS_EXHAUSTED, got ${String(error)}`,
      );
    });
  }

  const backups = options.backups ?? NOT_DECLARED;
  if (backups !== true) skipped("leases backup worker ids distinct from every other id", backups);
  else {
    scenario("leases backup worker ids distinct from every other id", async (s) => {
      const a = await s.acquire(await s.registry(), 0, { backups: 2 });
      const b = await s.acquire(await s.registry(), 1, { backups: 2 });
      const all = [a, b].flatMap((l) => [l.workerId, ...l.backups.map((x) => x.workerId)]);
      expectTrue(a.backups.length === 2 && b.backups.length === 2, "backups missing");
      expectTrue(new Set(all).size === 6, `ids not distinct: ${all.join(", ")}`);
    });
  }

  const requested = options.requestedWorkerId ?? NOT_DECLARED;
  if (isUnsupported(requested)) {
    scenario("refuses a requested worker id it cannot grant, never granting another", async (s) => {
      const error = await acquireError(s.acquire(await s.registry(), 0, { workerId: 1 }));
      expectTrue(
        isLeafError(error, ErrorCodes.INVALID_ARGUMENT),
        `expected INVALID_ARGUMENT for a requested worker id, got ${describe(error)}`,
      );
    });
  } else {
    scenario(
      "grants exactly a requested worker id and refuses it to a second node while held",
      async (s) => {
        const wanted = Math.min(5, maxWorkerId);
        const a = await s.acquire(await s.registry(), 0, { workerId: wanted });
        expectTrue(a.workerId === wanted, `asked for worker id ${wanted}, got ${a.workerId}`);
        const error = await acquireError(s.acquire(await s.registry(), 1, { workerId: wanted }));
        expectTrue(
          isLeafError(error, ErrorCodes.WORKER_ID_IN_USE),
          `a second node asking for held worker id ${wanted}: expected WORKER_ID_IN_USE, got ${describe(error)}`,
        );
        const other = await s.acquire(await s.registry(), 2);
        expectTrue(
          other.workerId !== wanted,
          `a node asking for any id got the requested id ${wanted}, still held`,
        );
        const taken = await acquireError(
          s.acquire(await s.registry(), 3, { workerId: other.workerId }),
        );
        expectTrue(
          isLeafError(taken, ErrorCodes.WORKER_ID_IN_USE),
          `asking for worker id ${other.workerId}, granted without a request: expected WORKER_ID_IN_USE, got ${describe(taken)}`,
        );
        expectTrue(!a.lost.aborted, "the holder lost its lease to a refused request");
      },
    );

    scenario("grants a released requested worker id again, with its last timestamp", async (s) => {
      const wanted = Math.min(3, maxWorkerId);
      const first = await s.acquire(await s.registry(), 0, { workerId: wanted });
      const final = Date.now() - 1_000;
      await first.release(final);
      const again = await s.acquire(await s.registry(), 1, { workerId: wanted });
      expectTrue(again.workerId === wanted, `asked for worker id ${wanted}, got ${again.workerId}`);
      expectTrue(
        again.lastTimestamp >= final,
        `lastTimestamp ${again.lastTimestamp} is below the previous holder's final report ${final}`,
      );
    });

    scenario("refuses a requested worker id outside the layout's range", async (s) => {
      const error = await acquireError(
        s.acquire(await s.registry(), 0, { workerId: maxWorkerId + 1 }),
      );
      expectTrue(
        isLeafError(error, ErrorCodes.INVALID_ARGUMENT),
        `worker id ${maxWorkerId + 1} with maxWorkerId ${maxWorkerId}: expected INVALID_ARGUMENT, got ${describe(error)}`,
      );
    });
  }

  const loss = options.leaseLoss ?? NOT_DECLARED;
  if (isUnsupported(loss)) skipped("signals a lost lease and the wired generator is fenced", loss);
  else {
    scenario("signals a lost lease and the wired generator is fenced", async (s) => {
      const worker = new SnowflakeWorker({
        registry: await s.registry(),
        node: s.node(0),
        reacquire: false,
      });
      await worker.start();
      try {
        const lease = worker.lease!;
        worker.nextId();
        await loss.induce(lease, { namespace: s.namespace });
        await waitFor(
          () => lease.lost.aborted,
          loss.waitMs ?? 20_000,
          "lease.lost was not aborted",
        );
        expectTrue(
          isLeafError(lease.lost.reason, ErrorCodes.LEASE_LOST),
          `lost.reason is ${String(lease.lost.reason)}`,
        );
        let error: unknown;
        try {
          worker.nextId();
        } catch (e) {
          error = e;
        }
        expectTrue(
          isLeafError(error, ErrorCodes.LEASE_LOST),
          `expected LEASE_LOST from nextId, got ${String(error)}`,
        );
        expectTrue(
          (error as { leafCode?: number }).leafCode === -4,
          "LEASE_LOST must carry Leaf code -4",
        );
      } finally {
        await worker.close().catch(() => {});
      }
    });
  }
}

interface Scenario {
  namespace: string;
  node(i: number): NodeIdentity;
  registry(): Promise<WorkerIdRegistry>;
  acquire(
    registry: WorkerIdRegistry,
    i: number,
    extra?: Partial<AcquireRequest>,
  ): Promise<WorkerLease>;
}

/** The rejection of `pending`, or undefined when it resolved. */
async function acquireError(pending: Promise<unknown>): Promise<unknown> {
  try {
    await pending;
    return undefined;
  } catch (error) {
    return error;
  }
}

/** An outcome for a failure message: the error's code and message, or "a lease". */
function describe(error: unknown): string {
  if (error === undefined) return "a lease";
  return isLeafError(error) ? `${error.code}: ${error.message}` : String(error);
}

async function waitFor(check: () => boolean, ms: number, message: string): Promise<void> {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`conformance: ${message} within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
}
