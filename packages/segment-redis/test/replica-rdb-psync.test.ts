// A replica restarted from its own older RDB (Redis 7 keeps the replication id and offset in it)
// re-syncs in part from the master and is then promoted (an attacker's case, kept): two direct
// replicas, waitReplicas 2; it holds every range answered, so the promotion is accepted, 0 twice.
import { countRepeatedIds, redisCommand, redisInfoField } from "@leaf/testkit";
import { expect, it } from "vitest";
import { RedisSegmentStore } from "../src/index";
import { freshNamespace, replicaSetPerTest, sleep, takeRanges } from "./helpers";

const startSet = replicaSetPerTest();

it("replica restarted from its own older RDB, partial re-sync, promoted", async () => {
  const set = await startSet(2);
  const namespace = freshNamespace("a9-rdb");
  const open = (url: string) =>
    new RedisSegmentStore({ url, namespace, commandTimeoutMs: 3000, waitReplicas: 2 });
  const ids: bigint[] = [];
  const admin = open(set.master.url);
  await admin.createNamespace();
  await admin.createTag({ tag: "t", step: 100 });
  expect(await takeRanges(admin, "t", ids, 1)).toBe("answered");
  await set.waitInSync();
  const p = set.replicas[0]!;
  expect(await redisCommand(p.port, "SAVE")).toBe("OK");
  expect(await takeRanges(admin, "t", ids, 5)).toBe("answered");
  await p.kill();
  await p.start();
  await set.waitInSync();
  const partial = await redisInfoField(set.master.port, "stats", "sync_partial_ok");
  await sleep(1100);
  expect(await takeRanges(admin, "t", ids, 2)).toBe("answered");
  await set.waitInSync();
  await admin.close();
  await set.promote(0);
  const held = await redisCommand(p.port, "HGET", `leaf:segment:{${namespace}}:tag:t`, "max_id");
  console.log(`promoted P holds max_id ${held}; highest id answered ${ids.at(-1)}`);
  expect(BigInt(String(held))).toBeGreaterThan(ids.at(-1)!);
  const after = open(p.url);
  const outcome = await takeRanges(after, "t", ids, 5);
  const state = await after.inspect();
  await after.close();
  const count = countRepeatedIds([BigInt64Array.from(ids)]);
  console.log(
    `replica from own RDB (sync_partial_ok ${partial}): ${count.duplicates} of ${count.total} twice; ${outcome}; fence ${JSON.stringify(state.fence)}; accepted ${JSON.stringify(state.lastAccepted)}`,
  );
  expect(count.duplicates).toBe(0);
}, 120_000);
