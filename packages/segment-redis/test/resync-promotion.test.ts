// A replica that re-synced from another history, then promoted (found by an attacker, on 2094033).
// With two replicas and waitReplicas 1: the master snapshots, hands out more ranges, is SIGKILLed
// and restarted from its older snapshot before any script runs on it. Both replicas re-sync from it
// in full, so their data rolls back to the snapshot. One is promoted. It had been running since
// before the marker's last write, so the "running when written" check took it for a replica that
// received every acknowledged range: the takeover was accepted and 500 of 1,600 ids were handed
// out twice. A takeover is now accepted only when the promoted replica's previous replication id
// (master_replid2) is the one the marker recorded; a restarted master takes a new one.
//
// The control: a replica restarted and re-synced from the live master, then promoted, is still
// accepted (its history is the marked master's), and nothing is handed out twice.

import { countRepeatedIds, redisCommand, redisInfoField, waitUntil } from "@leaf/testkit";
import { describe, expect, it } from "vitest";
import { RedisSegmentStore } from "../src/index";
import { collectRange, freshNamespace, replicaSetPerTest, sleep, takeRanges } from "./helpers";

const startSet = replicaSetPerTest();

async function replicasLinked(replicaPorts: number[]): Promise<boolean> {
  for (const port of replicaPorts) {
    if ((await redisInfoField(port, "replication", "master_link_status")) !== "up") return false;
  }
  return true;
}

describe("a promoted replica that re-synced (waitReplicas 1, two replicas)", () => {
  it("from a master restarted from its older snapshot: README says fenced; 0 ids twice", async () => {
    const set = await startSet(2);
    const master = set.master;
    const namespace = freshNamespace("resync");
    const open = (url: string) =>
      new RedisSegmentStore({ url, namespace, commandTimeoutMs: 2000, waitReplicas: 1 });
    const admin = open(master.url);
    await admin.createNamespace();
    await admin.createTag({ tag: "t", step: 100 });
    const ids: bigint[] = [];
    collectRange(ids, await admin.takeRange("t"));
    expect(await redisCommand(master.port, "SAVE")).toBe("OK");
    expect(await takeRanges(admin, "t", ids, 5)).toBe("answered");
    await admin.close();
    await master.kill();
    await master.start();
    const replicaPorts = set.replicas.map((replica) => replica.port);
    await waitUntil("both replicas to re-sync in full from the restarted master", async () => {
      const fullSyncs = Number(await redisInfoField(master.port, "stats", "sync_full"));
      return fullSyncs >= 2 && (await replicasLinked(replicaPorts));
    });
    // The replica now holds the snapshot's data: the last 500 ids are gone from it.
    const rolledBack = await redisCommand(
      replicaPorts[0]!,
      "HGET",
      `leaf:segment:{${namespace}}:tag:t`,
      "max_id",
    );
    expect(rolledBack).toBe("101");
    const promoted = await set.promote(0);
    const after = open(promoted.url);
    const outcome = await takeRanges(after, "t", ids, 10);
    const state = await after.inspect();
    await after.close();
    const count = countRepeatedIds([BigInt64Array.from(ids)]);
    console.log(
      `re-synced from an older snapshot, then promoted: ${count.duplicates} of ${count.total} ids twice; first refusal ${outcome}; fence ${JSON.stringify(state.fence)}`,
    );
    expect(count.duplicates).toBe(0);
    expect(outcome).toBe("CORRUPT_DATA:stale-primary:restarted");
    expect(state.fence?.reason).toBe("restarted");
    expect(state.lastAccepted).toBeUndefined();
  }, 120_000);

  it("from the live master after the replica's own restart: the promotion is accepted; 0 ids twice", async () => {
    const set = await startSet(2);
    const namespace = freshNamespace("resync-live");
    const open = (url: string) =>
      new RedisSegmentStore({ url, namespace, commandTimeoutMs: 2000, waitReplicas: 1 });
    const admin = open(set.master.url);
    await admin.createNamespace();
    await admin.createTag({ tag: "t", step: 100 });
    const ids: bigint[] = [];
    expect(await takeRanges(admin, "t", ids, 3)).toBe("answered");
    const replica = set.replicas[0]!;
    await replica.kill();
    await replica.start(); // it follows the master again through its link, as before
    await set.waitInSync();
    // Its start is known to the second only (counted from the second's end): the next writes come
    // in a later second, so the replica was running when they were made.
    await sleep(1100);
    expect(await takeRanges(admin, "t", ids, 3)).toBe("answered");
    await set.waitInSync();
    await admin.close();
    const promoted = await set.promote(0);
    const after = open(promoted.url);
    const outcome = await takeRanges(after, "t", ids, 3);
    const state = await after.inspect();
    await after.close();
    const count = countRepeatedIds([BigInt64Array.from(ids)]);
    console.log(
      `replica restarted, re-synced from the live master, promoted: ${count.duplicates} of ${count.total} ids twice; ${outcome}; accepted ${JSON.stringify(state.lastAccepted)}`,
    );
    expect(count.duplicates).toBe(0);
    expect(outcome).toBe("answered");
    expect(state.fence).toBeUndefined();
    expect(state.lastAccepted?.reason).toBe("restarted");
  }, 120_000);
});
