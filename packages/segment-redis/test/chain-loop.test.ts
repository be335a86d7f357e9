// The marked master re-synced from its own lagging chained replica (found by an attacker, on
// 09ac6aa): A <- C <- X, X's link to C silently cut, so X still reports its link up and serves A a
// full sync of its older data under A's own replication id. A is then made master again
// (REPLICAOF NO ONE: promoted, its previous replication id the marker's), with or without CONFIG
// RESETSTAT. waitReplicas 1 (C acknowledged every range). The takeover checks found it (resynced,
// or promoted after the reset), but the accept branch did not look at which: "promoted, running
// since the last write, following the marked history" took it for a replica's promotion, 500 of
// 1,100 ids twice in both variants. A takeover is now accepted only when the marker names another
// process (restarted): the process that wrote the marker and was a replica since is always fenced.
import {
  countRepeatedIds,
  redisCommand,
  redisInfoField,
  startRedis,
  TcpProxy,
  waitUntil,
} from "@leaf/testkit";
import { describe, expect, it } from "vitest";
import { RedisSegmentStore } from "../src/index";
import { freshNamespace, takeRanges } from "./helpers";

const tagKey = (namespace: string) => `leaf:segment:{${namespace}}:tag:t`;

async function linkUp(port: number): Promise<boolean> {
  return (await redisInfoField(port, "replication", "master_link_status")) === "up";
}

describe("the marked master re-synced from its lagging chained replica, master again: fenced; 0 ids twice", () => {
  it.each(["RESETSTAT", "no RESETSTAT"])(
    "%s",
    async (variant) => {
      const a = await startRedis({ useEnv: false });
      const c = await startRedis({
        useEnv: false,
        args: ["--replicaof", "127.0.0.1", String(a.port)],
      });
      const linkCX = await TcpProxy.start({ targetPort: c.port });
      const x = await startRedis({
        useEnv: false,
        args: ["--replicaof", "127.0.0.1", String(linkCX.port)],
      });
      try {
        await waitUntil("C to sync", () => linkUp(c.port));
        await waitUntil("X to sync", () => linkUp(x.port));
        const namespace = freshNamespace("a8-loop");
        const admin = new RedisSegmentStore({ url: a.url, namespace, waitReplicas: 1 });
        await admin.createNamespace();
        await admin.createTag({ tag: "t", step: 100 });
        const ids: bigint[] = [];
        expect(await takeRanges(admin, "t", ids, 1)).toBe("answered");
        await waitUntil(
          "X to hold 101",
          async () => (await redisCommand(x.port, "HGET", tagKey(namespace), "max_id")) === "101",
        );
        linkCX.cutOff(); // silent: X still reports its link to C up
        expect(await takeRanges(admin, "t", ids, 5)).toBe("answered"); // C acknowledged each
        await admin.close();
        expect(await redisInfoField(x.port, "replication", "master_link_status")).toBe("up");
        const runId = await redisInfoField(a.port, "server", "run_id");
        await redisCommand(a.port, "REPLICAOF", "127.0.0.1", String(x.port));
        await waitUntil("A to sync from X", () => linkUp(a.port));
        expect(await redisCommand(a.port, "HGET", tagKey(namespace), "max_id")).toBe("101");
        expect(await redisCommand(a.port, "REPLICAOF", "NO", "ONE")).toBe("OK");
        if (variant === "RESETSTAT") await redisCommand(a.port, "CONFIG", "RESETSTAT");
        expect(await redisInfoField(a.port, "server", "run_id")).toBe(runId);
        await waitUntil("C to follow A again", async () => {
          return (
            (await linkUp(c.port)) &&
            (await redisCommand(c.port, "HGET", tagKey(namespace), "max_id")) === "101"
          );
        });
        const store = new RedisSegmentStore({
          url: a.url,
          namespace,
          waitReplicas: 1,
          commandTimeoutMs: 2000,
        });
        const outcome = await takeRanges(store, "t", ids, 5);
        const state = await store.inspect();
        await store.close();
        const count = countRepeatedIds([BigInt64Array.from(ids)]);
        console.log(
          `chain loop (${variant}): ${count.duplicates} of ${count.total} ids twice; ${outcome}; fence ${JSON.stringify(state.fence)}; accepted ${JSON.stringify(state.lastAccepted)}`,
        );
        expect(count.duplicates).toBe(0);
        expect(outcome).toMatch(/^CORRUPT_DATA:stale-primary:(resynced|promoted)$/);
      } finally {
        await linkCX.close();
        await x.dispose();
        await c.dispose();
        await a.dispose();
      }
    },
    120_000,
  );
});
