// A Sentinel-like failover and failback, nothing lost (an attacker's search for a false fence,
// kept): master M killed; replica R promoted; calls on R (accepted); M restarted empty (no
// persistence) as R's replica, a full sync; calls on R that M acknowledges (waitReplicas 1); then
// R fails and M is promoted; calls on M: accepted, 0 ids twice.
import { countRepeatedIds, redisCommand, redisInfoField, waitUntil } from "@leaf/testkit";
import { expect, it } from "vitest";
import { RedisSegmentStore } from "../src/index";
import { freshNamespace, replicaSetPerTest, sleep, takeRanges } from "./helpers";

const startSet = replicaSetPerTest();

const up = async (port: number) =>
  (await redisInfoField(port, "replication", "master_link_status")) === "up";

it("old master back as a replica, then failed over to", async () => {
  const set = await startSet(1);
  const namespace = freshNamespace("a9-double");
  const open = (url: string) =>
    new RedisSegmentStore({ url, namespace, commandTimeoutMs: 3000, waitReplicas: 1 });
  await sleep(1100);
  const ids: bigint[] = [];
  const admin = open(set.master.url);
  await admin.createNamespace();
  await admin.createTag({ tag: "t", step: 100 });
  expect(await takeRanges(admin, "t", ids, 3)).toBe("answered");
  await admin.close();
  await set.waitInSync();
  const [m, r] = [set.master, set.replicas[0]!];
  await m.kill();
  expect(await redisCommand(r.port, "REPLICAOF", "NO", "ONE")).toBe("OK");
  await m.start();
  await redisCommand(m.port, "REPLICAOF", "127.0.0.1", String(r.port));
  await waitUntil("M follows R", () => up(m.port));
  await sleep(1100);
  const onR = open(r.url);
  const first = await takeRanges(onR, "t", ids, 3);
  const stateR = await onR.inspect();
  await onR.close();
  await waitUntil(
    "M in sync",
    async () =>
      (await redisInfoField(m.port, "replication", "master_repl_offset")) ===
      (await redisInfoField(r.port, "replication", "master_repl_offset")),
  );
  await r.kill();
  expect(await redisCommand(m.port, "REPLICAOF", "NO", "ONE")).toBe("OK");
  await r.start();
  await redisCommand(r.port, "REPLICAOF", "127.0.0.1", String(m.port));
  await waitUntil("R follows M", () => up(r.port));
  const onM = open(m.url);
  const second = await takeRanges(onM, "t", ids, 3);
  const stateM = await onM.inspect();
  await onM.close();
  const count = countRepeatedIds([BigInt64Array.from(ids)]);
  console.log(
    `double failover: on R ${first} (accepted ${JSON.stringify(stateR.lastAccepted)}); on M ${second}; fence ${JSON.stringify(stateM.fence)}; accepted ${JSON.stringify(stateM.lastAccepted)}; ${count.duplicates} of ${count.total} twice`,
  );
  expect(count.duplicates).toBe(0);
  expect(first).toBe("answered");
  expect(second).toBe("answered");
}, 120_000);
