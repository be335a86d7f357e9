import { fileURLToPath } from "node:url";
import { ErrorCodes, isLeafError, SnowflakeWorker } from "@leaf/core";
import {
  ChildLines,
  countDuplicates,
  type EtcdHandle,
  findLibfaketime,
  spawnNode,
  startEtcd,
  started,
  stopAll,
  TcpProxy,
} from "@leaf/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { EtcdRegistry } from "../src/index";
import { ONE_WORKER, REGISTRY, WORKER } from "./fixtures/one-worker";

const HOLDER = fileURLToPath(new URL("./fixtures/holder.ts", import.meta.url));
const LIBFAKETIME = findLibfaketime();

let etcd: EtcdHandle;

beforeAll(async () => {
  etcd = await startEtcd({ useEnv: false });
});

afterAll(async () => {
  await stopAll();
});

function holder(url: string, service: string, ip: string, layout: "one" | "leaf", env = {}) {
  return new ChildLines(spawnNode(HOLDER, [url, service, ip, layout], { env }));
}

/** Every id a child printed, as bigints. */
function printedIds(child: ChildLines): bigint[] {
  return child.json<{ ids?: string[] }>().flatMap((line) => (line.ids ?? []).map(BigInt));
}

/** Starts a worker for the one-worker layout, retrying while another node still holds the id. */
async function startWhenFree(registry: EtcdRegistry, service: string, startToleranceMs?: number) {
  for (;;) {
    try {
      return await started(
        new SnowflakeWorker({
          registry,
          node: { name: service, ip: "10.2.0.200", port: 8080 },
          layout: ONE_WORKER,
          reacquire: false,
          generator: { randomSequenceStart: 0 },
          startToleranceMs,
          ...WORKER,
        }),
      );
    } catch (error) {
      if (!isLeafError(error, ErrorCodes.WORKER_IDS_EXHAUSTED)) throw error;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }
}

/**
 * Issues `count` ids, a turn of the event loop between batches. A fence while the lease is still
 * held (a renewal late on a loaded machine: not sticky, ids resume when it arrives) is waited out
 * for up to 10 s; a lease lost for good fails the test.
 */
async function issue(worker: SnowflakeWorker, count: number): Promise<bigint[]> {
  const ids: bigint[] = [];
  const deadline = Date.now() + 10_000;
  while (ids.length < count) {
    try {
      ids.push(...worker.nextIds(20));
    } catch (error) {
      if (!isLeafError(error, ErrorCodes.LEASE_LOST) || worker.state !== "held") throw error;
      if (Date.now() > deadline) throw error;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    await new Promise((resolve) => setImmediate(resolve));
  }
  return ids;
}

function duplicatesOf(...lists: bigint[][]): bigint[] {
  return countDuplicates(lists, Number.POSITIVE_INFINITY).examples;
}

const timeOf = (id: bigint) => ONE_WORKER.decompose(id).timestampMs;
function maxOf(ids: bigint[]): bigint {
  let max = ids[0]!;
  for (const id of ids) if (id > max) max = id;
  return max;
}

describe("registry-etcd with holders in separate processes", () => {
  it("gives eight processes that acquire at once eight distinct ids", async () => {
    const children = Array.from({ length: 8 }, (_, i) =>
      holder(etcd.url, "race", `10.2.0.${i + 1}`, "leaf"),
    );
    await Promise.all(children.map((c) => c.until((l) => l.length > 0, "the child ready")));
    for (const child of children) child.child.stdin!.write("go\n");
    await Promise.all(
      children.map((c) => c.until((l) => l.some((x) => x.includes("workerId")), "an id")),
    );
    const ids = children.map((c) => c.json<{ workerId?: number }>().find((l) => "workerId" in l)!);
    expect(new Set(ids.map((l) => l.workerId)).size).toBe(8);
    await Promise.all(children.map((c) => c.kill()));
  });

  it("hands the id of a holder killed with SIGKILL on, and the next holder starts after its last id", async () => {
    const child = holder(etcd.url, "killed", "10.2.0.1", "one");
    await child.until((l) => l.length > 0, "the child ready");
    child.child.stdin!.write("go\n");
    await child.until(() => printedIds(child).length > 2000, "the child issuing ids");
    await child.kill();
    const killedIds = printedIds(child);

    const registry = new EtcdRegistry({ url: etcd.url, ...REGISTRY });
    try {
      const worker = await startWhenFree(registry, "killed");
      const ids = await issue(worker, 2000);
      await worker.close();
      expect(duplicatesOf(killedIds, ids)).toEqual([]);
      expect(timeOf(ids[0]!)).toBeGreaterThan(timeOf(maxOf(killedIds)));
    } finally {
      await registry.close();
    }
  });

  it("starts the next holder after every id of a cut-off holder whose clock ran 3 s ahead", async () => {
    expect(LIBFAKETIME, "libfaketime (apt-get install faketime) is needed").toBeDefined();
    const proxy = await TcpProxy.start({ targetPort: etcd.port });
    const child = holder(`http://${proxy.address}`, "ahead", "10.2.0.1", "one", {
      LD_PRELOAD: LIBFAKETIME!,
      FAKETIME: "+3s",
      FAKETIME_DONT_FAKE_MONOTONIC: "1",
      NO_FAKE_STAT: "1",
    });
    const registry = new EtcdRegistry({ url: etcd.url, ...REGISTRY });
    try {
      await child.until((l) => l.length > 0, "the child ready");
      child.child.stdin!.write("go\n");
      await child.until((l) => l.some((x) => x.includes("workerId")), "the child's id");
      const childNow = child.json<{ now?: number }>().find((l) => l.now !== undefined)!.now!;
      expect(childNow).toBeGreaterThan(Date.now() + 2000);
      await child.until(() => printedIds(child).length > 2000, "the child issuing ids");

      proxy.cutOff();
      await child.until((l) => l.some((x) => x.includes("refused")), "the cut-off child fencing");
      // Read before the next holder starts: parsing millions of printed ids blocks the event loop
      // for about a second, longer than the new holder's lease margin (the child has fenced).
      const aheadIds = printedIds(child);
      // Waits (up to 10 s) for its clock to pass the stored horizon instead of refusing to start.
      const worker = await startWhenFree(registry, "ahead", 10_000);
      expect(child.json<{ refused?: string }>().find((l) => l.refused)!.refused).toBe("LEASE_LOST");
      const lastTimestamp = worker.lease!.lastTimestamp;
      const ids = await issue(worker, 2000);
      await worker.close();
      expect(duplicatesOf(aheadIds, ids)).toEqual([]);
      expect(lastTimestamp).toBeGreaterThanOrEqual(timeOf(maxOf(aheadIds)));
      expect(timeOf(ids[0]!)).toBeGreaterThan(timeOf(maxOf(aheadIds)));
    } finally {
      await child.kill();
      await registry.close();
      await proxy.close();
    }
  });
});
