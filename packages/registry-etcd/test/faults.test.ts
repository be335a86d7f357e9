// Real faults against a private etcd: the server stopped (SIGSTOP) past the lease TTL, and one
// holder cut off by a TCP proxy while another node waits for its id. The layout has one worker id
// (0 worker bits), so the second node can only ever get the first one's id: every id of both is
// kept and checked for duplicates, and the cut-off holder must fence before the other starts.
import { ErrorCodes, isLeafError, SnowflakeWorker } from "@leaf/core";
import {
  countDuplicates,
  type EtcdHandle,
  startEtcd,
  started,
  stopAll,
  TcpProxy,
} from "@leaf/testkit";
import { Etcd3 } from "etcd3";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { EtcdRegistry } from "../src/index";
import { ONE_WORKER, REGISTRY, TTL_SECONDS, WORKER } from "./fixtures/one-worker";

let etcd: EtcdHandle;

beforeAll(async () => {
  etcd = await startEtcd({ useEnv: false });
});

afterAll(async () => {
  await stopAll();
});

function registry(url: string): EtcdRegistry {
  return new EtcdRegistry({ url, ...REGISTRY });
}

const node = (name: string, i: number) => ({ name, ip: `10.1.0.${i}`, port: 8080 });

/** Issues ids in small batches, a turn of the event loop apart, until the worker refuses. */
async function issueUntilRefused(
  worker: SnowflakeWorker,
  ids: bigint[],
  stop: { requested: boolean },
): Promise<{ refusedAt: number; error: unknown }> {
  for (;;) {
    try {
      ids.push(...worker.nextIds(20));
    } catch (error) {
      return { refusedAt: performance.now(), error };
    }
    if (stop.requested) return { refusedAt: Number.NaN, error: undefined };
    await new Promise((resolve) => setImmediate(resolve));
  }
}

/** Starts a worker on `registry`, retrying while the id is still held by someone else. */
async function startWhenFree(registry: EtcdRegistry, service: string, i: number) {
  for (;;) {
    try {
      const worker = await started(
        new SnowflakeWorker({
          registry,
          node: node(service, i),
          layout: ONE_WORKER,
          reacquire: false,
          generator: { randomSequenceStart: 0 },
          ...WORKER,
        }),
      );
      return { worker, grantedAt: performance.now() };
    } catch (error) {
      if (!isLeafError(error, ErrorCodes.WORKER_IDS_EXHAUSTED)) throw error;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }
}

async function waitFor(check: () => boolean, what: string, ms = 30_000): Promise<void> {
  const deadline = performance.now() + ms;
  while (!check()) {
    if (performance.now() > deadline) throw new Error(`${what} did not happen within ${ms} ms`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

function expectNoDuplicates(...lists: bigint[][]): number {
  const count = countDuplicates(lists);
  expect(count.examples).toEqual([]);
  return count.total;
}

/**
 * A real etcd3 client whose next transaction, when `lateMs` is set, behaves as a request that took
 * a slow path: its caller gets no answer (an error at the 1 s deadline), and the request reaches
 * etcd `lateMs` after it was sent, where it is applied or refused by its own conditions (etcd counts
 * a call's timeout from its arrival). etcd cannot delay one request on demand; this is the client's
 * side of it. `landed` records whether each late transaction's conditions held.
 */
function lateWritesClient(real: Etcd3) {
  const control = { lateMs: 0, landed: [] as boolean[] };
  type Builder = ReturnType<Etcd3["if"]>;
  const wrap = (builder: Builder): Builder => {
    const proxy: Builder = new Proxy(builder, {
      get(target, prop) {
        if (prop === "commit" && control.lateMs > 0) {
          const lateMs = control.lateMs;
          control.lateMs = 0;
          return () => {
            setTimeout(() => {
              target.options({ deadline: Date.now() + 1000 });
              target.commit().then(
                (answer) => control.landed.push(answer.succeeded),
                () => control.landed.push(false),
              );
            }, lateMs);
            return new Promise((_, reject) =>
              setTimeout(() => reject(new Error("deadline exceeded (no answer came)")), 1000),
            );
          };
        }
        const value = Reflect.get(target, prop, target);
        if (typeof value !== "function") return value;
        return (...args: unknown[]) => {
          const result = value.apply(target, args);
          return result === target ? proxy : result;
        };
      },
    });
    return proxy;
  };
  const client = new Proxy(real, {
    get(target, prop) {
      if (prop === "if") return (...args: Parameters<Etcd3["if"]>) => wrap(target.if(...args));
      const value = Reflect.get(target, prop, target);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
  return { client, control };
}

describe("registry-etcd under real faults", () => {
  it("fences a holder while etcd is stopped past the TTL, and the next holder starts after its last id", async () => {
    const service = "paused";
    const a = registry(etcd.url);
    const b = registry(etcd.url);
    const aIds: bigint[] = [];
    const bIds: bigint[] = [];
    try {
      const { worker: first } = await startWhenFree(a, service, 1);
      const lease = first.lease!;
      const running = issueUntilRefused(first, aIds, { requested: false });
      await waitFor(() => aIds.length > 1000, "the first holder issuing ids");

      etcd.pause();
      const pausedAt = performance.now();
      let lostWhilePaused = false;
      try {
        await waitFor(() => lease.lost.aborted, "the lease being lost while etcd is stopped");
        lostWhilePaused = true;
        // Stay stopped past the TTL, so that etcd expires the lease as soon as it runs again.
        await waitFor(
          () => performance.now() - pausedAt > TTL_SECONDS * 1000 + 1000,
          "etcd stopped past the TTL",
        );
      } finally {
        etcd.resume();
      }
      expect(lostWhilePaused).toBe(true);
      const { error } = await running;
      expect(isLeafError(error, ErrorCodes.LEASE_LOST)).toBe(true);
      expect((error as { leafCode?: number }).leafCode).toBe(-4);
      expect(String((lease.lost.reason as Error).message)).toMatch(/no renewal confirmed by etcd/);

      const { worker: second } = await startWhenFree(b, service, 2);
      expect(second.lease!.workerId).toBe(lease.workerId);
      const stop = { requested: false };
      const issuing = issueUntilRefused(second, bIds, stop);
      await waitFor(() => bIds.length > 1000, "the second holder issuing ids");
      stop.requested = true;
      await issuing;
      await second.close();
      await first.close();

      const count = expectNoDuplicates(aIds, bIds);
      expect(count).toBeGreaterThan(2000);
      const lastOfA = ONE_WORKER.decompose(aIds[aIds.length - 1]!).timestampMs;
      const firstOfB = ONE_WORKER.decompose(bIds[0]!).timestampMs;
      expect(firstOfB).toBeGreaterThan(lastOfA);
    } finally {
      await a.close();
      await b.close();
    }
  });

  it("keeps a holder's record from moving back when one of its writes reaches etcd after later ones", async () => {
    const real = new Etcd3({ hosts: etcd.url });
    const { client, control } = lateWritesClient(real);
    // A TTL long enough that a write without an answer for 1 s does not fence the holder.
    const r = new EtcdRegistry({ client, ...REGISTRY, leaseTtlSeconds: 6 });
    const key = `${REGISTRY.prefix}/late/id/0`;
    const history: Array<{ timestamp: number; horizon: number }> = [];
    let watching = true;
    const watch = (async () => {
      let last = "";
      while (watching) {
        const text = await real.get(key).string();
        if (text !== null && text !== last) {
          last = text;
          const { timestamp, horizon } = JSON.parse(text) as { timestamp: number; horizon: number };
          history.push({ timestamp, horizon });
        }
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
    })();
    const ids: bigint[] = [];
    const stop = { requested: false };
    try {
      const { worker } = await startWhenFree(r, "late", 1);
      const lease = worker.lease!;
      const running = issueUntilRefused(worker, ids, stop);
      await new Promise((resolve) => setTimeout(resolve, 1000));
      // A write that arrives 2.5 s late, after several renewals and reports were stored.
      control.lateMs = 2500;
      await waitFor(() => control.landed.length === 1, "the late write to reach etcd", 10_000);
      // A write that lands before its answer's deadline, which its caller never hears of: the
      // holder's next write finds the record at another revision and must go on.
      control.lateMs = 900;
      await waitFor(() => control.landed.length === 2, "the second late write", 10_000);
      await new Promise((resolve) => setTimeout(resolve, 1500));
      expect(lease.lost.aborted).toBe(false);
      stop.requested = true;
      await running;
      await worker.close();
      watching = false;
      await watch;
      const backwards = history.filter(
        (h, i) =>
          i > 0 &&
          (h.timestamp < history[i - 1]!.timestamp ||
            (h.horizon < history[i - 1]!.horizon && h.horizon !== 0)),
      );
      expect(backwards, JSON.stringify(history)).toEqual([]);
      // The first arrived after later writes: its conditions failed. The second was the latest.
      expect(control.landed).toEqual([false, true]);
      expect(ids.length).toBeGreaterThan(1000);
    } finally {
      stop.requested = true;
      watching = false;
      await watch;
      await r.close();
      real.close();
    }
  });

  it("writes its own record over one overwritten by hand while it holds the id, and goes on", async () => {
    const real = new Etcd3({ hosts: etcd.url });
    const r = registry(etcd.url);
    const key = `${REGISTRY.prefix}/by-hand/id/0`;
    const ids: bigint[] = [];
    const stop = { requested: false };
    try {
      const failures: unknown[] = [];
      const worker = await started(
        new SnowflakeWorker({
          registry: r,
          node: node("by-hand", 1),
          layout: ONE_WORKER,
          reacquire: false,
          ...WORKER,
          onEvent: (event) => {
            if (event.type === "report-failed") failures.push(event.error);
          },
        }),
      );
      const lease = worker.lease!;
      // 20 ids every 2 ms: a steady load, few enough ids to count quickly.
      const running = (async () => {
        for (;;) {
          try {
            ids.push(...worker.nextIds(20));
          } catch (error) {
            return error;
          }
          if (stop.requested) return undefined;
          await new Promise((resolve) => setTimeout(resolve, 2));
        }
      })();
      await new Promise((resolve) => setTimeout(resolve, 600));
      const before = JSON.parse((await real.get(key).string())!) as { timestamp: number };
      await real.put(key).value("not a record");
      // Reports every 300 ms and horizon writes every third of the 2 s TTL: the first to find the
      // text would fail on CORRUPT_DATA without the rewrite.
      await new Promise((resolve) => setTimeout(resolve, 3 * TTL_SECONDS * 1000));
      const after = JSON.parse((await real.get(key).string())!) as {
        timestamp: number;
        horizon: number;
      };
      expect(after.timestamp).toBeGreaterThanOrEqual(before.timestamp);
      expect(after.horizon).toBeGreaterThan(Date.now() - 1000);
      expect(lease.lost.aborted).toBe(false);
      // Not one report refused on the text found (CORRUPT_DATA), though it was not a record.
      expect(failures).toEqual([]);
      const issued = ids.length;
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(ids.length).toBeGreaterThan(issued);
      stop.requested = true;
      const error = await running;
      await worker.close();
      expect(error).toBeUndefined();
      expectNoDuplicates(ids);
    } finally {
      stop.requested = true;
      await r.close();
      real.close();
    }
  });

  it("fences a holder cut off from etcd before another node is granted its id", async () => {
    const service = "cut";
    const proxy = await TcpProxy.start({ targetPort: etcd.port });
    const a = registry(`http://${proxy.address}`);
    const b = registry(etcd.url);
    const aIds: bigint[] = [];
    const bIds: bigint[] = [];
    try {
      const { worker: first } = await startWhenFree(a, service, 1);
      const lease = first.lease!;
      const aStop = { requested: false };
      const aRunning = issueUntilRefused(first, aIds, aStop);
      await waitFor(() => aIds.length > 1000, "the first holder issuing ids");

      proxy.cutOff();
      // The other node tries all along; it is granted the id once etcd expires the cut lease.
      const { worker: second, grantedAt } = await startWhenFree(b, service, 2);
      expect(second.lease!.workerId).toBe(lease.workerId);
      const bStop = { requested: false };
      const bRunning = issueUntilRefused(second, bIds, bStop);
      await waitFor(() => bIds.length > 1000, "the second holder issuing ids");
      bStop.requested = true;
      aStop.requested = true;
      const [aEnd] = await Promise.all([aRunning, bRunning]);
      // Released before the ids are counted: counting blocks the event loop longer than the TTL.
      await second.close();
      proxy.heal();
      const firstClosed = await first.close().then(
        () => "closed",
        (error: Error) => error.message,
      );

      const count = expectNoDuplicates(aIds, bIds);
      expect(count).toBeGreaterThan(2000);
      expect(firstClosed).toBe("closed");
      // The cut-off holder stopped on its own, before the other node even had the id.
      expect(lease.lost.aborted).toBe(true);
      expect(isLeafError(aEnd.error, ErrorCodes.LEASE_LOST)).toBe(true);
      expect(aEnd.refusedAt).toBeLessThan(grantedAt);
    } finally {
      await a.close();
      await b.close();
      await proxy.close();
    }
  });
});
