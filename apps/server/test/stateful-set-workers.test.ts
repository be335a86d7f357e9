// A StatefulSet pod of two worker processes (snowflake.statefulSet with server.workers=2): worker
// process k of pod leaf-N holds worker id N x 2 + k - 1, so pod leaf-1's workers hold 2 and 3.
// Through a shared registry (Redis here) each worker leases exactly its id: a second pod leaf-1 (a
// force-deleted pod's replacement, on a volume of its own) and a pod of another width asking for
// one of those ids are refused while the holders run; a worker SIGKILLed is started again by the
// primary under the same id once the dead process's lease ended. With the local registry the
// pod's volume holds both workers' locks. Every id counted, and decoded to its worker id.
import {
  countRepeatedIds,
  type LeafServerProcess,
  type RedisHandle,
  startRedis,
  stopAll,
} from "@leaf/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  IdLoad,
  killWorker,
  leafWorkerId,
  listWorkers,
  removeServerFolders,
  workersServer,
} from "./workers-process";

const NAME = "pods";
let redis: RedisHandle;
const servers: LeafServerProcess[] = [];

beforeAll(async () => {
  redis = await startRedis({ useEnv: false });
}, 120_000);

afterAll(async () => {
  await Promise.all(servers.map((s) => s.kill().catch(() => undefined)));
  await stopAll();
  removeServerFolders();
});

/** A pod named `hostname` of `workers` worker processes, with a data folder (volume) of its own. */
async function pod(label: string, hostname: string, snowflake: object, workers = 2) {
  const s = await workersServer(
    label,
    {
      name: NAME,
      segment: { enabled: false },
      snowflake: { ip: "127.0.0.1", statefulSet: true, ...snowflake },
    },
    { workers, env: { HOSTNAME: hostname } },
  );
  servers.push(s);
  return s;
}

/** Snowflake batches on eight keep-alive loops: the connections land on both workers. */
function load(port: number): IdLoad {
  return new IdLoad(
    port,
    Array(8).fill({ space: "snowflake", path: "/api/snowflake/get/k?count=200" }),
    8,
  );
}

/** Every id of `loads`: how many, how many twice, and the worker ids they carry. */
function counted(...loads: IdLoad[]) {
  const { total, duplicates, sorted } = countRepeatedIds(loads.flatMap((l) => [...l.ids.values()]));
  return { total, twice: duplicates, workerIds: new Set(Array.from(sorted, leafWorkerId)) };
}

describe("a StatefulSet pod of two worker processes", () => {
  it("through the Redis registry: leaf-1's workers lease 2 and 3; a second leaf-1 and a one-worker leaf-2 are refused; a SIGKILLed worker gets its id back after the lease; no id twice", async () => {
    const registry = { registry: "redis", redis: { url: redis.url, leaseMs: 3000 } };
    const first = await pod("leaf-1", "leaf-1", registry);
    await first.start();
    expect((await listWorkers(first)).map((w) => w.summary!.workerId)).toEqual([2, 3]);
    const firstLoad = load(first.port);
    await firstLoad.more(40_000);

    // A replacement pod leaf-1 on its own volume, and a pod whose width differs (one worker
    // process, so leaf-2 asks for id 2): both refused while leaf-1's workers hold their leases.
    const replacement = await pod("leaf-1 again", "leaf-1", registry);
    const refused = await replacement.tryStart();
    expect(refused.started).toBe(false);
    expect(refused.started ? "" : refused.output).toContain("WORKER_ID_IN_USE");
    const narrow = await pod("leaf-2 of one worker", "leaf-2", registry, 1);
    const narrowRefused = await narrow.tryStart();
    expect(narrowRefused.started).toBe(false);
    expect(narrowRefused.started ? "" : narrowRefused.output).toContain("WORKER_ID_IN_USE");
    expect(narrowRefused.started ? "" : narrowRefused.output).toContain("worker id 2");

    // Worker 2 SIGKILLed: its lease (3 s) outlives it, so the primary's restarts are refused until
    // it ends; then the new process leases id 3 again.
    const backAfterMs = await killWorker(first, 2);
    await firstLoad.more(40_000);
    await firstLoad.stop();
    const after = await listWorkers(first);
    expect(after.map((w) => w.summary!.workerId)).toEqual([2, 3]);
    expect(after[1]!.restarts).toBeGreaterThanOrEqual(1);
    expect(await first.stop()).toEqual({ code: 0, signal: null });

    // Stopped, leaf-1 released its ids: the replacement takes both.
    await replacement.start();
    expect((await listWorkers(replacement)).map((w) => w.summary!.workerId)).toEqual([2, 3]);
    const replacementLoad = load(replacement.port);
    await replacementLoad.more(40_000);
    await replacementLoad.stop();
    expect(await replacement.stop()).toEqual({ code: 0, signal: null });

    const ids = counted(firstLoad, replacementLoad);
    console.log(
      `pod leaf-1 of 2 workers on Redis: ${ids.total} ids, ${ids.twice} twice, worker ids ${[...ids.workerIds]}, worker 2 back ${backAfterMs} ms after its SIGKILL, codes ${JSON.stringify(Object.fromEntries(firstLoad.codes))}`,
    );
    expect(ids.twice).toBe(0);
    expect(ids.workerIds).toEqual(new Set([2, 3]));
    for (const code of firstLoad.codes.keys()) {
      expect(["ECONNRESET", "EPIPE", "TIMEOUT"]).toContain(code);
    }
    expect(replacementLoad.codes.size).toBe(0);
  }, 240_000);

  it("with the local registry (the pod's volume): the workers hold 2 and 3, and a SIGKILLed worker takes its id back; no id twice", async () => {
    const s = await pod("leaf-1 local", "leaf-1", { registry: "local" });
    await s.start();
    expect((await listWorkers(s)).map((w) => w.summary!.workerId)).toEqual([2, 3]);
    const l = load(s.port);
    await l.more(40_000);
    await killWorker(s, 1);
    await l.more(40_000);
    await l.stop();
    expect((await listWorkers(s)).map((w) => w.summary!.workerId)).toEqual([2, 3]);
    expect(await s.stop()).toEqual({ code: 0, signal: null });
    const ids = counted(l);
    console.log(
      `pod leaf-1 of 2 workers, local registry: ${ids.total} ids, ${ids.twice} twice, worker ids ${[...ids.workerIds]}`,
    );
    expect(ids.twice).toBe(0);
    expect(ids.workerIds).toEqual(new Set([2, 3]));
  }, 240_000);
});
