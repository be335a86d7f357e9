// Ordinary operations that lose nothing must not fence (an attacker's list, kept as regression
// tests). Each case runs a master with a replica and waitReplicas 1, does one operation, and takes
// ranges with a new store instance: answered, 0 ids twice. The last case was a false fence: a
// master that had been a replica before the marker was written (after any accepted failover)
// fenced as `resynced` once CONFIG RESETSTAT set its count of bytes read from a master back to 0.
// A count below the recorded one is now a reset, not a re-sync (a re-sync only adds bytes).
import {
  countRepeatedIds,
  type RedisHandle,
  type RedisReplicaSet,
  redisCommand,
  redisInfoField,
  startRedis,
  startRedisReplicaSet,
  waitUntil,
} from "@leaf/testkit";
import { afterEach, describe, expect, it } from "vitest";
import { RedisSegmentStore } from "../src/index";
import { freshNamespace, sleep, takeRanges } from "./helpers";

let set: RedisReplicaSet | undefined;
const extra: RedisHandle[] = [];

afterEach(async () => {
  await set?.dispose();
  for (const server of extra.splice(0)) await server.dispose().catch(() => {});
  set = undefined;
});

async function linkUp(port: number, masterPort?: number): Promise<boolean> {
  if (masterPort !== undefined) {
    if ((await redisInfoField(port, "replication", "master_port")) !== String(masterPort))
      return false;
  }
  return (await redisInfoField(port, "replication", "master_link_status")) === "up";
}

async function setUp(replicas = 1) {
  set = await startRedisReplicaSet({ replicas });
  await set.waitInSync();
  const namespace = freshNamespace("ordinary");
  const open = (url: string) =>
    new RedisSegmentStore({ url, namespace, commandTimeoutMs: 3000, waitReplicas: 1 });
  const admin = open(set.master.url);
  await admin.createNamespace();
  await admin.createTag({ tag: "t", step: 100 });
  const ids: bigint[] = [];
  expect(await takeRanges(admin, "t", ids, 3)).toBe("answered");
  await admin.close();
  // the replicas' start second must lie before the next writes (README 6.)
  await sleep(1100);
  return { set, namespace, open, ids };
}

/**
 * A failover as Sentinel makes it: the replica promoted, the old master following it; then a wall
 * second, so that the promoted replica ran before the next writes (README 6.).
 */
async function failOver(set: RedisReplicaSet) {
  const [oldMaster, replica] = [set.master, set.replicas[0]!];
  await set.promote(0);
  await redisCommand(oldMaster.port, "REPLICAOF", "127.0.0.1", String(replica.port));
  await waitUntil("old master follows", () => linkUp(oldMaster.port, replica.port));
  await sleep(1100);
  return { oldMaster, replica };
}

async function takeWith(store: RedisSegmentStore, ids: bigint[], n = 3) {
  const outcome = await takeRanges(store, "t", ids, n);
  const state = await store.inspect().catch(() => undefined);
  await store.close();
  const count = countRepeatedIds([BigInt64Array.from(ids)]);
  return { outcome, fence: state?.fence, accepted: state?.lastAccepted, count };
}

function report(name: string, r: Awaited<ReturnType<typeof takeWith>>) {
  console.log(
    `${name}: ${r.outcome}; fence ${JSON.stringify(r.fence)}; ${r.count.duplicates} of ${r.count.total} ids twice`,
  );
}

describe("ordinary operations, waitReplicas 1: not fenced, 0 ids twice", () => {
  it("a replica restarted (empty, full sync)", async () => {
    const { set, open, ids } = await setUp();
    await set.replicas[0]!.kill();
    await set.replicas[0]!.start();
    await set.waitInSync();
    const r = await takeWith(open(set.master.url), ids);
    report("replica restart", r);
    expect(r.count.duplicates).toBe(0);
    expect(r.outcome).toBe("answered");
  }, 120_000);

  it("a second replica added, then the first removed", async () => {
    const { set, open, ids } = await setUp();
    const second = await startRedis({
      useEnv: false,
      args: ["--replicaof", "127.0.0.1", String(set.master.port)],
    });
    extra.push(second);
    await waitUntil("the second replica", () => linkUp(second.port));
    const r1 = await takeWith(open(set.master.url), ids);
    report("second replica added", r1);
    await set.replicas[0]!.kill();
    const r2 = await takeWith(open(set.master.url), ids);
    report("first replica removed", r2);
    expect(r1.outcome).toBe("answered");
    expect(r2.outcome).toBe("answered");
    expect(r2.count.duplicates).toBe(0);
  }, 120_000);

  it("a replica re-synced in full after its backlog overflowed", async () => {
    const { set, open, ids } = await setUp();
    const master = set.master.port;
    expect(await redisCommand(master, "CONFIG", "SET", "repl-backlog-size", "16384")).toBe("OK");
    const before = Number(await redisInfoField(master, "stats", "sync_full"));
    set.links[0]!.cutOff();
    const filler = "x".repeat(4096);
    for (let i = 0; i < 40; i++) await redisCommand(master, "SET", `filler:${i}`, filler);
    set.links[0]!.heal();
    await redisCommand(master, "CLIENT", "KILL", "TYPE", "replica");
    await waitUntil(
      "a full re-sync",
      async () => Number(await redisInfoField(master, "stats", "sync_full")) > before,
    );
    await set.waitInSync();
    const r = await takeWith(open(set.master.url), ids);
    report("replica full re-sync (backlog overflow)", r);
    expect(r.outcome).toBe("answered");
  }, 120_000);

  it("BGSAVE and BGREWRITEAOF", async () => {
    const { set, open, ids } = await setUp();
    const master = set.master.port;
    await redisCommand(master, "BGSAVE");
    await waitUntil(
      "bgsave",
      async () => (await redisInfoField(master, "persistence", "rdb_bgsave_in_progress")) === "0",
    );
    await redisCommand(master, "BGREWRITEAOF");
    await waitUntil(
      "aof rewrite",
      async () =>
        (await redisInfoField(master, "persistence", "aof_rewrite_in_progress")) === "0" &&
        (await redisInfoField(master, "persistence", "aof_rewrite_scheduled")) === "0",
    );
    const r = await takeWith(open(set.master.url), ids);
    report("BGSAVE + BGREWRITEAOF", r);
    expect(r.outcome).toBe("answered");
  }, 120_000);

  it("failover, old master rejoins as replica, calls, failover back, calls", async () => {
    const { set, open, ids } = await setUp();
    const { oldMaster, replica } = await failOver(set);
    const r1 = await takeWith(open(replica.url), ids);
    report("failover there", r1);
    await waitUntil("in sync", async () => {
      const a = await redisInfoField(replica.port, "replication", "master_repl_offset");
      const b = await redisInfoField(oldMaster.port, "replication", "master_repl_offset");
      return a === b;
    });
    expect(await redisCommand(oldMaster.port, "REPLICAOF", "NO", "ONE")).toBe("OK");
    await redisCommand(replica.port, "REPLICAOF", "127.0.0.1", String(oldMaster.port));
    await waitUntil("replica follows", () => linkUp(replica.port, oldMaster.port));
    const r2 = await takeWith(open(oldMaster.url), ids);
    report("failover back", r2);
    expect(r2.count.duplicates).toBe(0);
    expect(r1.outcome).toBe("answered");
    expect(r2.outcome).toBe("answered");
  }, 120_000);

  it("failover, then CONFIG RESETSTAT on the new master (monitoring resets stats)", async () => {
    const { set, open, ids } = await setUp();
    const { replica } = await failOver(set);
    const r1 = await takeWith(open(replica.url), ids);
    report("failover (before RESETSTAT)", r1);
    expect(r1.outcome).toBe("answered");
    console.log(
      `input bytes on new master before RESETSTAT: ${await redisInfoField(replica.port, "stats", "total_net_repl_input_bytes")}`,
    );
    expect(await redisCommand(replica.port, "CONFIG", "RESETSTAT")).toBe("OK");
    const r2 = await takeWith(open(replica.url), ids);
    report("failover then CONFIG RESETSTAT", r2);
    expect(r2.count.duplicates).toBe(0);
    expect(r2.outcome).toBe("answered");
  }, 120_000);
});
