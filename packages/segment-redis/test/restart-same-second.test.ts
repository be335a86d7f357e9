// A master restarted within the second of its last write (an attack on 2ccbfc9): the restart fence
// rests on "this process started at or before the marker's written_ms". uptime_in_seconds is the
// difference of two whole-second clocks (now's second minus the start's second), so TIME - uptime
// is the start's second plus now's milliseconds: up to 999 ms EARLIER than the true start. A master
// that writes the marker, snapshots, takes more ranges, is killed and restarted within one wall
// second, and is then asked early in a later second, looked "running when written" and was
// accepted (100 of 1,100 ids twice per attempt). REDIS_TAKEOVER_LUA now counts uptime from the end
// of the start's second.
import { ErrorCodes, isLeafError } from "@leaf/core";
import { countRepeatedIds, redisCommand, redisHash, redisTimeMs } from "@leaf/testkit";
import { describe, expect, it } from "vitest";
import { RedisSegmentStore } from "../src/index";
import { freshNamespace, outcomeOf, replicaSetPerTest, sleep } from "./helpers";

const startSet = replicaSetPerTest();

/** Resolves once Redis TIME's milliseconds within the second are in [from, to). */
async function waitForMs(port: number, from: number, to: number): Promise<number> {
  for (;;) {
    const now = await redisTimeMs(port);
    const ms = now % 1000;
    if (ms >= from && ms < to) return now;
    await sleep(ms < from ? Math.max(1, from - ms - 5) : 1000 - ms + from - 5);
  }
}

describe("a master killed and restarted within one wall second (waitReplicas 1)", () => {
  it("snapshot, more ranges, kill, restart in the same second, first call early in the next second: README says fenced (restarted); ids must not repeat", async () => {
    const set = await startSet(1);
    const port = set.master.port;
    const url = set.master.url;
    const open = (namespace: string) =>
      new RedisSegmentStore({ url, namespace, commandTimeoutMs: 2000, waitReplicas: 1 });
    const results: string[] = [];
    let duplicatesTotal = 0;
    let acceptedRuns = 0;
    for (let attempt = 0; attempt < 3; attempt++) {
      await set.waitInSync();
      const namespace = freshNamespace("atk2-sec");
      const admin = open(namespace);
      await admin.createNamespace();
      await admin.createTag({ tag: "t", step: 100 });
      const before: bigint[] = [];
      const lost: bigint[] = [];
      await waitForMs(port, 550, 650);
      const r0 = await admin.takeRange("t");
      for (let id = r0.start; id < r0.end; id++) before.push(id);
      const written = Number((await redisHash(port, admin.keys.marker)).written_ms);
      expect(await redisCommand(port, "SAVE")).toBe("OK");
      for (let i = 0; i < 5; i++) {
        const r = await admin.takeRange("t");
        for (let id = r.start; id < r.end; id++) lost.push(id);
      }
      await admin.close();
      await set.master.kill();
      await set.master.start();
      const restartedAt = await redisTimeMs(port);
      const sameSecond = Math.floor(restartedAt / 1000) === Math.floor(written / 1000);
      const after = open(namespace);
      // First marker check early in a later second: ms of now below the ms of written_ms.
      await sleep(1000 - (restartedAt % 1000) + 5);
      await waitForMs(port, 0, Math.max(1, (written % 1000) - 60));
      const again: bigint[] = [];
      const outcomes: string[] = [];
      for (let i = 0; i < 30 && again.length < 500; i++) {
        try {
          const r = await after.takeRange("t");
          for (let id = r.start; id < r.end; id++) again.push(id);
        } catch (error) {
          outcomes.push(outcomeOf(error));
          if (!isLeafError(error, ErrorCodes.UNAVAILABLE)) break;
          await sleep(100);
        }
      }
      const state = await after.inspect();
      await after.close();
      const count = countRepeatedIds([BigInt64Array.from([...before, ...lost, ...again])]);
      if (state.lastAccepted !== undefined) acceptedRuns++;
      duplicatesTotal += count.duplicates;
      results.push(
        `attempt ${attempt}: written_ms ${written} restarted at ${restartedAt} (same second ${sameSecond}); after restart ${again.length} ids, ${count.duplicates} of ${count.total} twice (e.g. ${count.examples.slice(0, 3).join(", ")}); fence ${JSON.stringify(state.fence)} accepted ${JSON.stringify(state.lastAccepted)}; errors ${outcomes.join(" ")}`,
      );
      if (acceptedRuns >= 2) break;
    }
    console.log(results.join("\n"));
    console.log(`accepted takeovers: ${acceptedRuns}, ids twice in total: ${duplicatesTotal}`);
    expect(duplicatesTotal).toBe(0);
    expect(acceptedRuns).toBe(0);
  }, 180_000);
});
