// Recycle mode across a real network partition inside a 3-server ZooKeeper ensemble: node A talks
// only to follower s1, node B only to the leader and s2. s1 is cut off from both (every quorum link
// through the test kit's TCP proxies dropped): it keeps answering reads from its own copy for
// syncLimit ticks, while the leader expires A's session and lets B take the worker id. A must stop
// issuing before B gets the id. Both sides run real generators under a one-id layout (both want
// worker id 0), and every id of both is counted.
import { performance } from "node:perf_hooks";
import {
  defineLayout,
  ErrorCodes,
  isLeafError,
  layouts,
  SnowflakeWorker,
  type WorkerIdRegistry,
} from "@leaf/core";
import {
  countRepeatedIds,
  IdLog,
  started,
  startZookeeperEnsemble,
  type ZookeeperEnsembleHandle,
} from "@leaf/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ZookeeperRegistry } from "../src/index";
import { nodeOf, uniqueName, waitUntil } from "./helpers";

/** One worker id only (0): A and B compete for it. */
const oneId = defineLayout({ ...layouts.leaf, name: "one-id", workerBits: 0, sequenceBits: 22 });
const TRIALS = 10;
const SESSION_TIMEOUT_MS = 2_000;
/** ZooKeeper's tick: s1 keeps serving reads for syncLimit × tickTime = 5 s after the cut. */
const TICK_MS = 200;
const SYNC_LIMIT = 25;
const REPORT_INTERVAL_MS = 3_000;

let ensemble: ZookeeperEnsembleHandle;

beforeAll(async () => {
  ensemble = await startZookeeperEnsemble({
    tickTime: TICK_MS,
    syncLimit: SYNC_LIMIT,
    maxSessionTimeout: 10 * SESSION_TIMEOUT_MS,
  });
});

afterAll(async () => {
  await ensemble?.dispose();
});

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

interface TrialResult {
  trial: number;
  duplicates: number;
  idsA: number;
  idsB: number;
  /** ms after the cut: A's last id, A's lease lost, B's lease granted. */
  lastIdA: number;
  lostA: number;
  grantedB: number;
}

/** Takes up to 50 ids from `worker` into `log`; returns whether it issued any. */
function issue(worker: SnowflakeWorker, log: IdLog): boolean {
  let issued = false;
  for (let i = 0; i < 50; i++) {
    try {
      log.push(worker.nextId());
      issued = true;
    } catch (error) {
      if (!isLeafError(error, ErrorCodes.LEASE_LOST)) throw error;
      break;
    }
  }
  return issued;
}

async function runTrial(trial: number): Promise<TrialResult> {
  const leader = await ensemble.leader();
  const s1 = (leader + 1) % 3;
  const healthy = [0, 1, 2].filter((i) => i !== s1);
  const name = uniqueName("partition");
  const options = {
    mode: "recycle" as const,
    sessionTimeoutMs: SESSION_TIMEOUT_MS,
    connectTimeoutMs: 10_000,
    peerClockCheck: false as const,
  };
  const registryA = new ZookeeperRegistry({
    ...options,
    url: ensemble.connectStringOf([s1]),
  });
  const registryB = new ZookeeperRegistry({
    ...options,
    url: ensemble.connectStringOf(healthy),
  });
  let grantedB = Number.NaN;
  const timedB: WorkerIdRegistry = {
    kind: registryB.kind,
    acquire: async (request) => {
      const lease = await registryB.acquire(request);
      grantedB = performance.now();
      return lease;
    },
    close: () => registryB.close(),
  };
  // Leaf's report period (3 s), longer than the session: a follower answers A's reads until A's
  // next report, a write, waits for the leader (ZooKeeper answers one session in order).
  const workerOptions = {
    layout: oneId,
    reportIntervalMs: REPORT_INTERVAL_MS,
    firstReportDelayMs: 100,
    reacquire: false,
  };
  const idsA = new IdLog();
  const idsB = new IdLog();
  let workerB: SnowflakeWorker | undefined;
  let reports = 0;
  const workerA = await started(
    new SnowflakeWorker({
      ...workerOptions,
      registry: registryA,
      node: nodeOf(name, 0),
      onEvent: (event) => {
        if (event.type === "reported") reports++;
      },
    }),
  );
  const leaseA = workerA.lease!;
  let lastIdA = Number.NaN;
  let lostA = Number.NaN;
  leaseA.lost.addEventListener("abort", () => {
    lostA = performance.now();
  });
  let failure: unknown;
  const loop = setInterval(() => {
    try {
      if (issue(workerA, idsA)) lastIdA = performance.now();
      if (workerB) issue(workerB, idsB);
    } catch (error) {
      failure = error;
    }
  }, 1);
  let stopB = false;
  try {
    expect(leaseA.workerId).toBe(0);
    await waitUntil(() => reports >= 1, 10_000, "a report of A");
    // The cut falls anywhere in A's report period.
    await sleep(Math.floor(Math.random() * REPORT_INTERVAL_MS));
    ensemble.isolate(s1);
    const cutAt = performance.now();
    const startB = (async () => {
      while (!stopB) {
        try {
          workerB = await started(
            new SnowflakeWorker({
              ...workerOptions,
              registry: timedB,
              node: nodeOf(name, 1),
            }),
          );
          return;
        } catch (error) {
          // Id 0 is still leased (WORKER_IDS_EXHAUSTED) or the servers are busy: try again.
          if (!isLeafError(error)) throw error;
          await sleep(50);
        }
      }
    })();
    // The leader expires A's session about SESSION_TIMEOUT_MS after the cut; s1 serves for 5 s.
    await waitUntil(() => workerB !== undefined, 20_000, "B to take worker id 0");
    // Both keep issuing (or trying to) past the time s1 stops serving reads.
    await sleep(Math.max(1_000, TICK_MS * SYNC_LIMIT + 500 - (performance.now() - cutAt)));
    await startB;
    if (failure) throw failure;
    expect(workerB!.lease!.workerId).toBe(0);
    return {
      trial,
      duplicates: countRepeatedIds([idsA, idsB]).duplicates,
      idsA: idsA.count,
      idsB: idsB.count,
      lastIdA: Math.round(lastIdA - cutAt),
      lostA: Math.round(lostA - cutAt),
      grantedB: Math.round(grantedB - cutAt),
    };
  } finally {
    stopB = true;
    clearInterval(loop);
    ensemble.heal();
    await workerB?.close();
    await workerA.close();
    await registryA.close();
    await registryB.close();
    await ensemble.waitUntilServing();
  }
}

describe("recycle mode under a partition inside the ensemble", () => {
  it(`fences a node on a cut-off follower before the leader gives its id away (${TRIALS} trials, every id counted)`, async () => {
    const results: TrialResult[] = [];
    for (let trial = 1; trial <= TRIALS; trial++) results.push(await runTrial(trial));
    const summary = JSON.stringify(results);
    // Ids were issued on both sides of every trial: the check below counted real ids.
    for (const r of results) {
      expect(r.idsA, summary).toBeGreaterThan(0);
      expect(r.idsB, summary).toBeGreaterThan(0);
    }
    expect(
      results.reduce((n, r) => n + r.duplicates, 0),
      summary,
    ).toBe(0);
    // A stopped (its lease lost, its last id issued) before the leader granted B the id.
    for (const r of results) {
      expect(r.lostA, summary).toBeLessThan(r.grantedB);
      expect(r.lastIdA, summary).toBeLessThan(r.grantedB);
    }
  }, 600_000);
});
