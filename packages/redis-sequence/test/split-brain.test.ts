// A split brain: a partition isolates the master R1, with client A on its side, from its replicas
// R2 and R3, with client B on theirs; R2 is promoted (as Sentinel would on B's side) and R3 follows
// it, while R1 keeps running as a master. A and B draw ids of one shard of one namespace the whole
// time, before the cut, through it and after the promotion, and every id is kept. R1 has no trace
// of the promotion, so its marker cannot tell: only Redis's `min-replicas-to-write` stops R1, which
// refuses writes (NOREPLICAS) once it has heard no replica for `min-replicas-max-lag` seconds;
// R2, after its fence (its marker names R1's run id: reason `restarted`), hands out seconds past
// every second R1 granted. R2 is promoted as soon as R1 refuses writes, so R1 granted A ranges of
// the promotion's very second: only R2's fence keeps B from handing them out again (taken out of
// the script, the first test found those ids repeated in every run tried). The same scenario
// without the setting shows why the README requires it: R1 serves A for as long as the partition
// lasts, and A and B hand out the same ids.
//
// Every server has the same settings, as a deployment would: R2 accepts writes once promoted
// because R3 replicates from it. A and B reach "the master" through TCP proxies (fronts): A's stays
// on R1; B's is cut with the partition and moved to R2 at the promotion, as a Sentinel-aware client
// or a virtual IP would move. Real clocks throughout (the same host's, so A and B agree).
import { ErrorCodes, isLeafError, type LeafError } from "@leaf/core";
import {
  countDuplicates,
  type RedisReplicaSet,
  redisCommand,
  redisErrorCount,
  redisHash,
  redisInfoField,
  startRedisReplicaSet,
  stopAll,
  TcpProxy,
  waitUntil,
} from "@leaf/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { RedisSequence } from "../src/index";
import { freshNamespace, secondsOf, sleep, warningSink } from "./helpers";

/** `min-replicas-max-lag`, seconds. R1 accepts writes for up to MAX_LAG + 2 s after the cut. */
const MAX_LAG = 2;
const TEST_MS = 150_000;
/** The shard A and B both draw for: with the namespace's one counter per second, ids collide. */
const SHARD = 7;
const GUARD = ["--min-replicas-to-write", "1", "--min-replicas-max-lag", String(MAX_LAG)];

const closers: (() => Promise<unknown>)[] = [];
let guarded: RedisReplicaSet;
let unguarded: RedisReplicaSet;

beforeAll(async () => {
  [guarded, unguarded] = await Promise.all([
    startRedisReplicaSet({ replicas: 2, args: GUARD }),
    startRedisReplicaSet({ replicas: 2 }),
  ]);
  closers.push(
    () => guarded.dispose(),
    () => unguarded.dispose(),
  );
}, TEST_MS);

afterAll(async () => {
  for (const close of closers.reverse()) await close().catch(() => {});
  await stopAll();
});

/** A started sequence of `namespace` through the front at `port`, with the default timings. */
async function sequenceAt(port: number, namespace: string): Promise<RedisSequence> {
  const sequence = new RedisSequence({
    url: `redis://127.0.0.1:${port}`,
    namespace,
    connectTimeoutMs: 10_000,
    onWarning: warningSink().onWarning,
  });
  closers.push(() => sequence.close());
  await sequence.start();
  return sequence;
}

/** What one client drew: every id, the second of each, and every refusal. */
interface Drawer {
  ids: bigint[];
  /** Ids per Unix second. */
  perSecond: Map<number, number>;
  errors: LeafError[];
  stop(): Promise<void>;
}

/**
 * Draws ids of SHARD from `sequence` until stopped, 20 per call, a few ms apart (a steady load,
 * about as fast on both clients), keeping every id; a refused call is kept and tried again shortly.
 */
function drawContinuously(sequence: RedisSequence): Drawer {
  const drawer: Drawer = { ids: [], perSecond: new Map(), errors: [], stop: async () => {} };
  let running = true;
  const loop = (async () => {
    while (running) {
      try {
        for (const id of await sequence.nextIds(SHARD, 20)) {
          drawer.ids.push(id);
          const second = Math.floor(sequence.layout.decompose(id).timestampMs / 1000);
          drawer.perSecond.set(second, (drawer.perSecond.get(second) ?? 0) + 1);
        }
        await sleep(2);
      } catch (error) {
        if (!isLeafError(error) || error.code === ErrorCodes.CLOSED) throw error;
        drawer.errors.push(error);
        await sleep(20);
      }
    }
  })();
  drawer.stop = async () => {
    running = false;
    await loop;
  };
  return drawer;
}

/** Seconds (Unix) in which both drawers drew ids. */
function sharedSeconds(a: Drawer, b: Drawer): number[] {
  return [...b.perSecond.keys()].filter((second) => a.perSecond.has(second)).sort();
}

const isNoReplicas = (error: LeafError) => /NOREPLICAS/.test(error.message);

interface Outcome {
  a: RedisSequence;
  drawA: Drawer;
  drawB: Drawer;
  /** Index in drawA.ids / drawB.ids / drawA.errors at the promotion. */
  aIdsAtPromotion: number;
  bIdsAtPromotion: number;
  aErrorsAtPromotion: number;
  /** Redis TIME second of R2 just before its promotion. */
  promotedSecond: number;
  /** R2's marker once B drew there. */
  markerOnR2: Record<string, string>;
}

/**
 * A and B draw on R1; the partition cuts R1 off from R2, R3 and B (A still reaches R1); once R1 has
 * heard no replica for over MAX_LAG s (and, with the setting, refuses writes), R2 is promoted, R3
 * follows it and B's front moves to R2. Both go on drawing until `enough` says so.
 */
async function splitUnderA(
  set: RedisReplicaSet,
  label: string,
  enough: (drawA: Drawer, drawB: Drawer, o: Omit<Outcome, "markerOnR2">) => boolean,
): Promise<Outcome> {
  const r1 = set.master;
  const r2 = set.replicas[0]!;
  await set.waitInSync();
  if (set === guarded) {
    await waitUntil(
      "R1 to count both replicas as good (it accepts writes from then on)",
      async () => (await redisInfoField(r1.port, "replication", "min_slaves_good_slaves")) === "2",
    );
  }
  const fa = await TcpProxy.start({ targetPort: r1.port });
  const fb = await TcpProxy.start({ targetPort: r1.port });
  closers.push(
    () => fa.close(),
    () => fb.close(),
  );
  const namespace = freshNamespace(label);
  const a = await sequenceAt(fa.port, namespace);
  const b = await sequenceAt(fb.port, namespace);
  const marker = a.keys.marker();

  // Both draw on R1 (after the new namespace's fence); R2 and R3 get R1's counters and marker.
  const drawA = drawContinuously(a);
  const drawB = drawContinuously(b);
  closers.push(drawA.stop, drawB.stop);
  await waitUntil(
    "A and B to draw ids on R1",
    () => drawA.ids.length > 2000 && drawB.ids.length > 2000,
  );
  const runIdR1 = await redisInfoField(r1.port, "server", "run_id");
  await waitUntil("R2 and R3 to have R1's marker", async () => {
    for (const replica of set.replicas) {
      if ((await redisHash(replica.port, marker)).run_id !== runIdR1) return false;
    }
    return true;
  });

  // The partition: R1 hears nothing more from its replicas, nor B from R1; A still reaches R1.
  fb.cutOff();
  await set.isolateMaster(MAX_LAG);
  if (set === guarded) {
    // R1 counts its good replicas once a second: it refuses writes from the next count on.
    await waitUntil(
      "R1 to refuse writes",
      async () => (await redisInfoField(r1.port, "replication", "min_slaves_good_slaves")) === "0",
    );
  }

  // B's side: R2 is promoted while R1 runs on as a master, R3 follows R2, B's front moves to R2.
  const promotedSecond = Number(((await redisCommand(r2.port, "TIME")) as string[])[0]);
  const at = {
    a,
    drawA,
    drawB,
    aIdsAtPromotion: drawA.ids.length,
    bIdsAtPromotion: drawB.ids.length,
    aErrorsAtPromotion: drawA.errors.length,
    promotedSecond,
  };
  await set.promote(0);
  fb.retarget(r2.port);
  expect(await redisInfoField(r1.port, "replication", "role")).toBe("master");

  await waitUntil("both to draw long enough after the promotion", () => enough(drawA, drawB, at));
  await drawB.stop();
  await drawA.stop();
  return { ...at, markerOnR2: await redisHash(r2.port, marker) };
}

describe("redis-sequence across a split brain (the old master keeps running)", () => {
  it(
    "with min-replicas-to-write the isolated master refuses A's allocations (NOREPLICAS) and B, on the promoted replica, draws only seconds past A's: no id repeats",
    async () => {
      const set = guarded;
      const refusedBefore = await redisErrorCount(set.master.port, "NOREPLICAS");
      const o = await splitUnderA(set, "split", (drawA, drawB, at) => {
        const bAfter = drawB.ids.length - at.bIdsAtPromotion;
        const aRefusedAfter = drawA.errors.slice(at.aErrorsAtPromotion).filter(isNoReplicas);
        // B drew for two seconds on R2 while A kept asking R1 and was refused.
        const bSeconds = [...drawB.perSecond.keys()].filter((s) => s > at.promotedSecond);
        return bAfter > 2000 && bSeconds.length >= 2 && aRefusedAfter.length > 10;
      });
      const all = [...o.drawA.ids, ...o.drawB.ids];
      const count = countDuplicates([all], 5);
      const bAfter = o.drawB.ids.slice(o.bIdsAtPromotion);
      const aAfter = o.drawA.ids.slice(o.aIdsAtPromotion);
      console.log(
        `split brain with min-replicas-to-write: ${count.total} ids, ${count.duplicates} issued ` +
          `twice (A ${o.drawA.ids.length} ids, ${aAfter.length} after the promotion from ranges ` +
          `granted before, ${o.drawA.errors.length} refusals; B ` +
          `${o.drawB.ids.length} ids, ${bAfter.length} after the promotion)`,
      );
      expect({ duplicates: count.duplicates, examples: count.examples }).toEqual({
        duplicates: 0,
        examples: [],
      });

      // A was refused by R1 itself: NOREPLICAS, counted by R1, and UNAVAILABLE for the caller.
      // Each says Redis refused (the first failure, then "has refused writes since"), none that
      // it did not answer.
      const refusals = o.drawA.errors.filter(isNoReplicas);
      expect(refusals.length).toBeGreaterThan(0);
      for (const refusal of refusals) {
        expect(refusal.code).toBe(ErrorCodes.UNAVAILABLE);
        expect(refusal.message).toMatch(
          /(refused the write \(|has refused writes since .* Last failure: )NOREPLICAS Not enough good replicas to write/,
        );
      }
      expect(await redisErrorCount(set.master.port, "NOREPLICAS")).toBeGreaterThan(refusedBefore);
      expect(o.a.state().status).toBe("unavailable");

      // B drew after the promotion, on R2, past R2's fence: the marker there named R1's run id.
      expect(bAfter.length).toBeGreaterThan(2000);
      expect(o.markerOnR2).toMatchObject({ reason: "restarted" });
      expect(o.markerOnR2.run_id).toBe(
        await redisInfoField(set.replicas[0]!.port, "server", "run_id"),
      );
      const fence = Number(o.markerOnR2.fence);
      expect(fence).toBeGreaterThanOrEqual(o.promotedSecond + 2);
      expect(secondsOf(o.a, bAfter).first).toBeGreaterThan(fence);
      // Every id A drew (R1 refused it before the promotion) is of a second before B's first.
      expect(secondsOf(o.a, o.drawA.ids).last).toBeLessThan(secondsOf(o.a, bAfter).first);
      expect(secondsOf(o.a, o.drawA.ids).last).toBeLessThanOrEqual(o.promotedSecond);
      // A went on asking R1 after the promotion and was refused; what it still drew then came from
      // ranges R1 granted before it refused (of seconds up to the promotion, checked above).
      expect(
        o.drawA.errors.slice(o.aErrorsAtPromotion).filter(isNoReplicas).length,
      ).toBeGreaterThan(10);
    },
    TEST_MS,
  );

  it(
    "without min-replicas-to-write the isolated master serves A on and ids repeat: why the README requires it",
    async () => {
      const set = unguarded;
      const o = await splitUnderA(set, "split-unguarded", (drawA, drawB, at) => {
        const shared = sharedSeconds(drawA, drawB).filter((s) => s > at.promotedSecond);
        return shared.length >= 2;
      });
      const bAfter = o.drawB.ids.slice(o.bIdsAtPromotion);
      const aAfter = o.drawA.ids.slice(o.aIdsAtPromotion);
      const count = countDuplicates([[...o.drawA.ids, ...o.drawB.ids]], 5);
      console.log(
        `split brain without min-replicas-to-write: ${count.duplicates} ids issued twice ` +
          `(A ${o.drawA.ids.length} ids, ${aAfter.length} after the promotion; B ` +
          `${o.drawB.ids.length} ids, ${bAfter.length} after it)`,
      );
      // R1 never refused A; R2 fenced as above, then both drew the same seconds from 0.
      expect(await redisErrorCount(set.master.port, "NOREPLICAS")).toBe(0);
      expect(o.drawA.errors.filter(isNoReplicas)).toEqual([]);
      expect(o.markerOnR2).toMatchObject({ reason: "restarted" });
      expect(secondsOf(o.a, bAfter).first).toBeGreaterThan(Number(o.markerOnR2.fence));
      expect(secondsOf(o.a, aAfter).last).toBeGreaterThan(Number(o.markerOnR2.fence));
      expect(count.duplicates).toBeGreaterThan(0);
    },
    TEST_MS,
  );
});
