// Issue 24 item 4: two pods with the same StatefulSet ordinal (a force-deleted pod still running
// while its replacement starts on another volume), as two real server processes with HOSTNAME=leaf-3
// and data folders of their own. Through a shared registry (Redis, etcd, MySQL lease mode,
// ZooKeeper recycle mode) the ordinal is leased: the second is refused while the first runs and
// takes the id once the first is gone. With the local registry alone (volume only) both issue
// under worker id 3, as its README says. Every id counted.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { layouts } from "@leaf/core";
import {
  countDuplicates,
  freePort,
  LeafServerProcess,
  startEtcd,
  startMysql,
  startRedis,
  startZookeeper,
  stopAll,
} from "@leaf/testkit";
import { afterAll, describe, expect, it } from "vitest";
import { CLI } from "./cli-process";
import { Load, until } from "./fault-servers";

const dirs: string[] = [];
afterAll(async () => {
  await stopAll();
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

const BATCH = "/api/snowflake/get/pod?count=2000";
const POD = { HOSTNAME: "leaf-3", LEAF_SNOWFLAKE_STATEFUL_SET: "true" };

/** A "pod": a server process named leaf-3, with a data folder (its volume) of its own. */
async function pod(label: string, dir: string, snowflake: Record<string, unknown>) {
  return new LeafServerProcess({
    cli: CLI,
    label,
    dir,
    port: await freePort(),
    config: { name: "pods", segment: { enabled: false }, snowflake, server: { drainMs: 0 } },
    env: POD,
    readyTimeoutMs: 60_000,
  });
}

/** The worker id of every id in `batches` (the leaf layout's). */
function workerIds(batches: string[][]): Set<number> {
  const ids = new Set<number>();
  for (const batch of batches) {
    for (const id of batch) ids.add(Number(layouts.leaf.decompose(BigInt(id)).workerId));
  }
  return ids;
}

const SHARED: Array<{ kind: string; snowflake: () => Promise<Record<string, unknown>> }> = [
  {
    kind: "redis",
    snowflake: async () => ({
      registry: "redis",
      redis: { url: (await startRedis({ useEnv: false })).url, leaseMs: 3000 },
    }),
  },
  {
    kind: "mysql (lease mode)",
    snowflake: async () => {
      const mysql = await startMysql();
      return {
        registry: "mysql",
        mysql: {
          url: mysql.urlFor(await mysql.createDatabase("leaf_pods")),
          username: mysql.user,
          password: mysql.password ?? "",
          mode: "lease",
          leaseMs: 3000,
          createTable: true,
        },
      };
    },
  },
  {
    kind: "zk (recycle mode)",
    snowflake: async () => ({
      registry: "zk",
      zk: {
        address: (await startZookeeper({ useEnv: false })).url,
        mode: "recycle",
        sessionTimeoutMs: 4000,
      },
    }),
  },
  {
    kind: "etcd",
    snowflake: async () => ({
      registry: "etcd",
      etcd: { url: (await startEtcd({ useEnv: false })).url, leaseTtlSeconds: 2 },
    }),
  },
];

/**
 * A registry's URL named without snowflake.registry chooses that registry: it is never ignored for
 * the volume-only local registry (config.test.ts checks the choice; here, the lease it brings).
 */
const URL_ONLY: Array<{ kind: string; snowflake: () => Promise<Record<string, unknown>> }> = [
  {
    kind: "redis",
    snowflake: async () => ({
      redis: { url: (await startRedis({ useEnv: false })).url, leaseMs: 3000 },
    }),
  },
  {
    kind: "etcd",
    snowflake: async () => ({
      etcd: { url: (await startEtcd({ useEnv: false })).url, leaseTtlSeconds: 2 },
    }),
  },
];

describe("two pods with the same StatefulSet ordinal on different volumes", () => {
  for (const { kind, snowflake } of SHARED) {
    it(`through the ${kind} registry: the second is refused while the first runs, then takes the ordinal; no id repeats`, async () => {
      const dir = mkdtempSync(join(tmpdir(), "leaf-pods-"));
      dirs.push(dir);
      const settings = await snowflake();
      const old = await pod("old", dir, settings);
      const replacement = await pod("new", dir, settings);
      expect(old.dataDir).not.toBe(replacement.dataDir);
      await old.start();
      const oldLoad = new Load(old.port, BATCH, 2, 4);
      await until("the old pod under load", () => oldLoad.ids >= 100_000);

      const refused = await replacement.tryStart();
      expect(refused.started).toBe(false);
      expect(refused.started ? "" : refused.output).toContain("WORKER_ID_IN_USE");
      expect(refused.started ? "" : refused.output).toContain("worker id 3");
      await until("more ids from the old pod", () => oldLoad.ids >= 200_000);

      // The old pod finally dies (its node comes back and kills it); the new one, restarted by
      // Kubernetes, gets the ordinal once the old lease ended, and starts after its horizon.
      await old.kill();
      await oldLoad.stop();
      await until(
        "the new pod taking worker id 3",
        async () => (await replacement.tryStart()).started,
        60_000,
      );
      const newLoad = new Load(replacement.port, BATCH, 2, 4);
      await until("the new pod under load", () => newLoad.ids >= 100_000);
      await newLoad.stop();
      await replacement.stop();

      const all = [...oldLoad.batches, ...newLoad.batches];
      const count = countDuplicates(all);
      console.log(
        `${kind}: old pod ${oldLoad.ids} ids, new pod ${newLoad.ids} ids, ${count.duplicates} duplicates`,
      );
      expect(workerIds(all)).toEqual(new Set([3]));
      expect(count.duplicates).toBe(0);
    }, 240_000);
  }

  for (const { kind, snowflake } of URL_ONLY) {
    it(`with only the ${kind} registry's URL named (snowflake.registry left out): the second pod is refused while the first runs`, async () => {
      const dir = mkdtempSync(join(tmpdir(), "leaf-pods-url-"));
      dirs.push(dir);
      const settings = await snowflake();
      const old = await pod("old", dir, settings);
      const replacement = await pod("new", dir, settings);
      await old.start();
      const refused = await replacement.tryStart();
      expect(refused.started).toBe(false);
      expect(refused.started ? "" : refused.output).toContain("WORKER_ID_IN_USE");
      expect(refused.started ? "" : refused.output).toContain("worker id 3");
      await old.stop();
    }, 120_000);
  }

  it("with the local registry alone (volume only): both issue under worker id 3 and ids repeat, as documented", async () => {
    const dir = mkdtempSync(join(tmpdir(), "leaf-pods-local-"));
    dirs.push(dir);
    const old = await pod("old", dir, { registry: "local" });
    const replacement = await pod("new", dir, { registry: "local" });
    await old.start();
    await replacement.start();
    const loads = [old, replacement].map((p) => new Load(p.port, BATCH, 2, 4));
    await until("both pods under load", () => loads.every((l) => l.ids >= 100_000));
    // Ids repeat only where both pods issue in the same milliseconds: on a loaded machine (a
    // fresh-clone CI run once saw none in the first 100,000 ids each) that can take longer.
    const deadline = Date.now() + 60_000;
    while (
      countDuplicates(loads.flatMap((l) => l.batches)).duplicates === 0 &&
      Date.now() < deadline
    ) {
      await new Promise((resolve) => setTimeout(resolve, 2000));
    }
    await Promise.all(loads.map((l) => l.stop()));
    await Promise.all([old.stop(), replacement.stop()]);
    const all = loads.flatMap((l) => l.batches);
    const count = countDuplicates(all);
    console.log(
      `local: ${loads.map((l) => l.ids).join(" + ")} ids, ${count.duplicates} duplicates`,
    );
    expect(workerIds(all)).toEqual(new Set([3]));
    expect(count.duplicates).toBeGreaterThan(0);
  }, 240_000);
});
