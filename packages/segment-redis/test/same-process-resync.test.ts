// The marked master's own process given older data (found by an attacker, on 73998f9). The marker
// names the process by its run id, which a restart changes and a re-sync does not: a master made a
// replica of a server with older data (REPLICAOF) takes that data in a full sync. Made master again
// it reports `second_repl_offset` (promoted: fenced), but once its backlog is freed after
// `repl-backlog-ttl` without replicas, Redis gives it a new replication id and clears the link to
// the old one, and it looked like the process that wrote the marker with nothing lost: 500 of
// 1,100 ids twice. The marker now records, at each write, the bytes the process has read from a
// master (INFO's total_net_repl_input_bytes, Redis 7): a master reads none, so a count other than
// the recorded one means the process was a replica since, and it is fenced (`resynced`). A script on a
// writable replica (`replica-read-only no`) wrote there and answered: 500 of 1,100 ids twice; a
// script on a replica is now refused (READONLY). CONFIG RESETSTAT sets that count back to 0; the
// replication-id rule still tells then: a new replication id not linked to the recorded one, on a
// process that kept a backlog at the last write (or whose offset went back), is `resynced` too.
//
// The control: a master that had no replica when the namespace was written gets its first one
// (Redis takes a new replication id then, with the offset kept): not fenced.
import {
  countRepeatedIds,
  type RedisReplicaSet,
  redisCommand,
  redisInfoField,
  startRedis,
  startRedisReplicaSet,
  TcpProxy,
  waitUntil,
} from "@leaf/testkit";
import { afterEach, describe, expect, it } from "vitest";
import { RedisSegmentStore } from "../src/index";
import { freshNamespace, takeRanges } from "./helpers";

let set: RedisReplicaSet | undefined;
let alone: Awaited<ReturnType<typeof startRedis>> | undefined;

afterEach(async () => {
  await set?.dispose();
  await alone?.dispose();
  set = undefined;
  alone = undefined;
});

const tagKey = (namespace: string) => `leaf:segment:{${namespace}}:tag:t`;

async function maxIdOn(port: number, namespace: string): Promise<unknown> {
  return await redisCommand(port, "HGET", tagKey(namespace), "max_id");
}

async function linkUp(port: number): Promise<boolean> {
  return (await redisInfoField(port, "replication", "master_link_status")) === "up";
}

/** Frees `port`'s backlog (no replica, repl-backlog-ttl 1 s): a new replication id, no link. */
async function freeBacklog(port: number): Promise<void> {
  expect(await redisCommand(port, "CONFIG", "SET", "repl-backlog-ttl", "1")).toBe("OK");
  await waitUntil("the backlog to be freed", async () => {
    return (await redisInfoField(port, "replication", "repl_backlog_active")) === "0";
  });
}

/** A new store instance (no floor) takes 5 ranges on `url`; its outcome, fence and the count. */
async function takeAfter(url: string, namespace: string, waitReplicas: number, ids: bigint[]) {
  const store = new RedisSegmentStore({ url, namespace, commandTimeoutMs: 2000, waitReplicas });
  const outcome = await takeRanges(store, "t", ids, 5);
  const state = await store.inspect().catch(() => undefined);
  await store.close();
  const count = countRepeatedIds([BigInt64Array.from(ids)]);
  return { outcome, fence: state?.fence, count };
}

/**
 * A master with one replica (through its link), a namespace with tag "t" (step 100), and one range
 * taken and held by the replica: the ids so far, and the store that took them.
 */
async function oneRangeReplicated(label: string, waitReplicas: number) {
  set = await startRedisReplicaSet({ replicas: 1 });
  await set.waitInSync();
  const [master, replica] = [set.master, set.replicas[0]!];
  const namespace = freshNamespace(label);
  const admin = new RedisSegmentStore({ url: master.url, namespace, waitReplicas });
  await admin.createNamespace();
  await admin.createTag({ tag: "t", step: 100 });
  const ids: bigint[] = [];
  expect(await takeRanges(admin, "t", ids, 1)).toBe("answered");
  await waitUntil(
    "the replica to hold 101",
    async () => (await maxIdOn(replica.port, namespace)) === "101",
  );
  return { master, replica, link: set.links[0]!, namespace, admin, ids };
}

describe("the process that wrote the marker, given older data", () => {
  it("waitReplicas 1: the master re-synced from its replica restarted from an older snapshot, master again, backlog freed: README says fenced (resynced); 0 ids twice", async () => {
    const { master, replica, link, namespace, admin, ids } = await oneRangeReplicated(
      "same-resync",
      1,
    );
    expect(await redisCommand(replica.port, "SAVE")).toBe("OK");
    expect(await takeRanges(admin, "t", ids, 5)).toBe("answered"); // each acknowledged by it
    await admin.close();
    const runId = await redisInfoField(master.port, "server", "run_id");
    // The replica crashes, comes back from its snapshot cut off, and is made a master.
    link.cutOff();
    await replica.kill();
    await replica.start();
    expect(await redisCommand(replica.port, "REPLICAOF", "NO", "ONE")).toBe("OK");
    // The old master follows it (a full sync: the snapshot's data), and is made master again.
    await redisCommand(master.port, "REPLICAOF", "127.0.0.1", String(replica.port));
    await waitUntil("the old master to sync", () => linkUp(master.port));
    expect(await maxIdOn(master.port, namespace)).toBe("101");
    expect(await redisCommand(master.port, "REPLICAOF", "NO", "ONE")).toBe("OK");
    await freeBacklog(master.port);
    await redisCommand(replica.port, "REPLICAOF", "127.0.0.1", String(master.port));
    await waitUntil("the replica to follow it", () => linkUp(replica.port));
    expect(await redisInfoField(master.port, "server", "run_id")).toBe(runId);
    const { outcome, fence, count } = await takeAfter(master.url, namespace, 1, ids);
    console.log(
      `re-synced, master again, backlog freed: ${count.duplicates} of ${count.total} ids twice; ${outcome}`,
    );
    expect(count.duplicates).toBe(0);
    expect(outcome).toBe("CORRUPT_DATA:stale-primary:resynced");
    expect(fence?.reason).toBe("resynced");
  }, 120_000);

  it.each([
    "a writable replica",
    "master again, backlog freed",
    "master again, CONFIG RESETSTAT, backlog freed",
  ])(
    "waitReplicas 0: the old master re-synced from a promoted replica that missed ranges, then %s: refused; 0 ids twice",
    async (ending) => {
      const { master, replica, link, namespace, admin, ids } = await oneRangeReplicated(
        "same-stale",
        0,
      );
      link.cutOff();
      expect(await takeRanges(admin, "t", ids, 5)).toBe("answered"); // the replica misses these
      await admin.close();
      expect(await redisCommand(replica.port, "REPLICAOF", "NO", "ONE")).toBe("OK");
      const writable = ending === "a writable replica";
      if (writable) await redisCommand(master.port, "CONFIG", "SET", "replica-read-only", "no");
      await redisCommand(master.port, "REPLICAOF", "127.0.0.1", String(replica.port));
      await waitUntil("the old master to sync", () => linkUp(master.port));
      await waitUntil(
        "it to hold the replica's data",
        async () => (await maxIdOn(master.port, namespace)) === "101",
      );
      if (!writable) {
        expect(await redisCommand(master.port, "REPLICAOF", "NO", "ONE")).toBe("OK");
        // CONFIG RESETSTAT sets the bytes read from a master back to 0, as the marker recorded:
        // the replication-id rule tells (it kept a backlog at the last write). Found by an attacker.
        if (ending.includes("RESETSTAT")) await redisCommand(master.port, "CONFIG", "RESETSTAT");
        await freeBacklog(master.port);
      }
      const { outcome, count } = await takeAfter(master.url, namespace, 0, ids);
      console.log(`${ending}: ${count.duplicates} of ${count.total} ids twice; ${outcome}`);
      expect(count.duplicates).toBe(0);
      expect(outcome).toMatch(
        writable
          ? /^UNAVAILABLE:READONLY leaf segment-redis: this Redis is a replica/
          : /^CORRUPT_DATA:stale-primary:resynced$/,
      );
    },
    120_000,
  );

  it("waitReplicas 0: a marker copy written before the master had a replica, taken back by a full re-sync: fenced (resynced); 0 ids twice", async () => {
    // Found by a second attacker: the copy that replaces the master's data names its own process
    // and says it kept no backlog, so only the bytes the process read from a master tell.
    alone = await startRedis({ useEnv: false });
    const master = alone;
    const namespace = freshNamespace("same-first-copy");
    const admin = new RedisSegmentStore({ url: master.url, namespace, waitReplicas: 0 });
    await admin.createNamespace();
    await admin.createTag({ tag: "t", step: 100 });
    const ids: bigint[] = [];
    expect(await takeRanges(admin, "t", ids, 1)).toBe("answered"); // no replica yet: no backlog
    const link = await TcpProxy.start({ targetPort: master.port });
    const replica = await startRedis({
      useEnv: false,
      args: ["--replicaof", "127.0.0.1", String(link.port)],
    });
    try {
      await waitUntil("the replica to sync", () => linkUp(replica.port));
      expect(await maxIdOn(replica.port, namespace)).toBe("101");
      link.cutOff();
      expect(await takeRanges(admin, "t", ids, 5)).toBe("answered"); // the replica misses these
      await admin.close();
      expect(await redisCommand(replica.port, "REPLICAOF", "NO", "ONE")).toBe("OK");
      await redisCommand(master.port, "REPLICAOF", "127.0.0.1", String(replica.port));
      await waitUntil("the old master to sync", () => linkUp(master.port));
      await waitUntil(
        "it to hold the replica's data",
        async () => (await maxIdOn(master.port, namespace)) === "101",
      );
      expect(await redisCommand(master.port, "REPLICAOF", "NO", "ONE")).toBe("OK");
      await freeBacklog(master.port);
      const { outcome, fence, count } = await takeAfter(master.url, namespace, 0, ids);
      console.log(
        `first copy re-synced: ${count.duplicates} of ${count.total} ids twice; ${outcome}`,
      );
      expect(count.duplicates).toBe(0);
      expect(outcome).toBe("CORRUPT_DATA:stale-primary:resynced");
      expect(fence?.reason).toBe("resynced");
    } finally {
      await link.close();
      await replica.dispose();
    }
  }, 120_000);

  it("a first replica attached to a master that had none: not fenced; 0 ids twice", async () => {
    alone = await startRedis({ useEnv: false });
    const namespace = freshNamespace("first-replica");
    const admin = new RedisSegmentStore({ url: alone.url, namespace });
    await admin.createNamespace();
    await admin.createTag({ tag: "t", step: 100 });
    const ids: bigint[] = [];
    expect(await takeRanges(admin, "t", ids, 3)).toBe("answered");
    const replidBefore = await redisInfoField(alone.port, "replication", "master_replid");
    const follower = await startRedis({
      useEnv: false,
      args: ["--replicaof", "127.0.0.1", String(alone.port)],
    });
    try {
      await waitUntil("the replica to sync", () => linkUp(follower.port));
      expect(await redisInfoField(alone.port, "replication", "master_replid")).not.toBe(
        replidBefore,
      );
      expect(await takeRanges(admin, "t", ids, 3)).toBe("answered");
      await admin.close();
      const { outcome, fence, count } = await takeAfter(alone.url, namespace, 0, ids);
      expect(count.duplicates).toBe(0);
      expect(outcome).toBe("answered");
      expect(fence).toBeUndefined();
    } finally {
      await follower.dispose();
    }
  }, 120_000);
});
