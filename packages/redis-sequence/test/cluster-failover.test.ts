// A real Redis Cluster failover that loses the last writes, with the master's host going silent:
// three masters, each with one replica, started through the test kit. The master M that owns the
// namespace's slot announces a TCP proxy as its address (`cluster-announce-port`), so its replica R
// replicates through it; the proxy is cut (R hears nothing more, as when the master dies before its
// asynchronous replication stream left it). Clients A and B of one namespace draw ids of one shard
// the whole time, through Cluster clients the sequences made themselves from the node URLs before
// the failover; their only option is a natMap that sends M's announced address through a second
// proxy (the network between them and M's host). Then M's host goes silent (that proxy is cut: no
// reset reaches the clients, as when a machine loses power) and M is killed (SIGKILL); the cluster
// itself promotes R after `cluster-node-timeout` (no Sentinel, no manual command). Every id is kept
// and checked for duplicates.
//
// A's clock is ahead of B's by AHEAD_MS (less than maxClockSkewMs, which the sequence allows), so
// the seconds A drew on M after the cut are still current for B when R is promoted: R never saw
// their counters, and only R's fence (now + maxClockSkewMs + fenceMarginMs, by R's TIME) keeps B
// from being handed their sequences again. A has no demand from the kill until B has asked R (else
// A's first grant on R raises R's high-water second past B's seconds, which refuses them too).
// Taken out of the script, the fence lets B draw A's seconds from 0 again: those ids repeat.
//
// The clients' connections to M stay open and unanswered, so nothing (no reset, no MOVED) tells
// their Cluster clients that the slot moved: only a periodic slot refresh does
// (`slotsRefreshInterval`, which the sequence sets by default; ioredis's default is none).
//
// `cluster-replica-validity-factor 0`: R's link to M is cut for a while before M dies, and a
// replica whose data is older than node-timeout x factor would not stand for election.
import { performance } from "node:perf_hooks";
import { type Clock, ErrorCodes, isLeafError, type LeafError, systemClock } from "@leaf/core";
import {
  countDuplicates,
  type RedisClusterPair,
  type RedisHandle,
  redisClusterNodes,
  redisClusterPairThroughProxy,
  redisCommand,
  redisHash,
  redisInfoField,
  redisKeyInSlots,
  redisReplicaCommand,
  redisReplicaInSync,
  startRedisCluster,
  TcpProxy,
  waitUntil,
} from "@leaf/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { RedisSequence, sequenceKeys } from "../src/index";
import { freshNamespace, secondsOf, sleep, warningSink } from "./helpers";

const TEST_MS = 150_000;
const NODE_TIMEOUT_MS = 3000;
/** How far A's clock is ahead of B's (and of Redis TIME). */
const AHEAD_MS = 15_000;
/** Larger than AHEAD_MS, so that Redis grants A's seconds; sizes the fence. */
const SKEW_MS = 18_000;
const MARGIN_MS = 1000;
/** How long before the kill the replication link is cut: A's seconds drawn meanwhile R misses. */
const CUT_LEAD_MS = 12_000;
/** The shard A and B both draw for: with the namespace's one counter per second, ids collide. */
const SHARD = 7;

type NatMap = Record<string, { host: string; port: number }>;

let nodes: RedisHandle[];
const closers: (() => Promise<unknown>)[] = [];

beforeAll(async () => {
  nodes = await startRedisCluster({
    masters: 3,
    replicasPerMaster: 1,
    args: [
      "--cluster-node-timeout",
      String(NODE_TIMEOUT_MS),
      "--cluster-replica-validity-factor",
      "0",
    ],
  });
}, TEST_MS);

afterAll(async () => {
  for (const close of closers.reverse()) await close().catch(() => {});
  await Promise.all(nodes.map((n) => n.dispose()));
});

type Pair = RedisClusterPair;

/** The first master (by its first slot) and its replica, replicating through a proxy. */
async function firstPair(): Promise<Pair> {
  const pair = await redisClusterPairThroughProxy(nodes, 0);
  closers.push(() => pair.replication.close());
  return pair;
}

/** A fresh namespace whose keys live in one of the pair's slots. */
async function namespaceOn(pair: Pair): Promise<string> {
  for (;;) {
    const namespace = freshNamespace("cluster-failover");
    const key = sequenceKeys(namespace).marker();
    if (await redisKeyInSlots(pair.master.port, key, pair.slots)) return namespace;
  }
}

/** A hash on the replica at `port`, as an object. */
async function hashOnReplica(port: number, key: string): Promise<Record<string, string>> {
  const flat = ((await redisReplicaCommand(port, "HGETALL", key)) ?? []) as string[];
  const hash: Record<string, string> = {};
  for (let i = 0; i + 1 < flat.length; i += 2) hash[flat[i]!] = flat[i + 1]!;
  return hash;
}

/**
 * A started sequence of `namespace` on a Cluster client it makes itself from every node's URL.
 * Only `natMap` is passed: the master's announced address (the cut proxy) leads to the master.
 */
async function sequenceOn(namespace: string, natMap: NatMap, clock: Clock): Promise<RedisSequence> {
  const sequence = new RedisSequence({
    url: nodes.map((n) => n.url),
    clusterOptions: { natMap },
    namespace,
    clock,
    maxClockSkewMs: SKEW_MS,
    fenceMarginMs: MARGIN_MS,
    connectTimeoutMs: 10_000,
    onWarning: warningSink().onWarning,
  });
  closers.push(() => sequence.close());
  await sequence.start();
  return sequence;
}

/** What one client drew: every id, with the time it came, and every refusal. */
interface Drawer {
  ids: bigint[];
  /** performance.now() when each id came (same index as ids). */
  at: number[];
  errors: { at: number; error: LeafError }[];
  /** Draws nothing until resumed (a client with no demand for a while). */
  paused: boolean;
  stop(): Promise<void>;
}

/** Draws ids of SHARD until stopped, 20 per call, a few ms apart; a refused call is tried again. */
function drawContinuously(sequence: RedisSequence): Drawer {
  const drawer: Drawer = { ids: [], at: [], errors: [], paused: false, stop: async () => {} };
  let running = true;
  const loop = (async () => {
    while (running) {
      if (drawer.paused) {
        await sleep(20);
        continue;
      }
      try {
        const ids = await sequence.nextIds(SHARD, 20);
        const now = performance.now();
        for (const id of ids) {
          drawer.ids.push(id);
          drawer.at.push(now);
        }
        await sleep(2);
      } catch (error) {
        if (!isLeafError(error) || error.code === ErrorCodes.CLOSED) throw error;
        drawer.errors.push({ at: performance.now(), error });
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

/** The ids drawn after `since` (performance.now()). */
function drawnAfter(drawer: Drawer, since: number): bigint[] {
  return drawer.ids.filter((_, i) => drawer.at[i]! > since);
}

/**
 * Watches, from now on, when R becomes a master (its INFO) and when each sequence first hears
 * from it: its fence moves past `fenceBefore` (R's first answer, a range or a refusal, carries
 * R's new fence). Times are performance.now().
 */
function watchFailover(
  replicaPort: number,
  sequences: RedisSequence[],
  fenceBefore: number,
): { promotedAt: number; heardAt: number[]; heardSecond: number[]; stop(): Promise<void> } {
  const seen = {
    promotedAt: Number.NaN,
    heardAt: sequences.map(() => Number.NaN),
    heardSecond: sequences.map(() => Number.NaN),
  };
  let running = true;
  const loop = (async () => {
    while (running) {
      sequences.forEach((sequence, i) => {
        const fence = sequence.state().fence?.untilSecond ?? -1;
        if (Number.isNaN(seen.heardAt[i]!) && fence > fenceBefore) {
          seen.heardAt[i] = performance.now();
          seen.heardSecond[i] = sequence.state().currentSecond;
        }
      });
      if (
        Number.isNaN(seen.promotedAt) &&
        (await redisInfoField(replicaPort, "replication", "role")) === "master"
      ) {
        seen.promotedAt = performance.now();
      }
      await sleep(20);
    }
  })();
  return {
    get promotedAt() {
      return seen.promotedAt;
    },
    heardAt: seen.heardAt,
    heardSecond: seen.heardSecond,
    stop: async () => {
      running = false;
      await loop;
    },
  };
}

describe("redis-sequence across a real Redis Cluster failover that loses writes", () => {
  it(
    "the promoted replica missed the last counters: detected (its marker names the dead master), its fence covers every second drawn on the old master, no id repeats, and both long-lived clients draw on it",
    async () => {
      const pair = await firstPair();
      const namespace = await namespaceOn(pair);
      const keys = sequenceKeys(namespace);
      // The network between the clients and M's host.
      const toMaster = await TcpProxy.start({ targetPort: pair.master.port });
      closers.push(() => toMaster.close());
      const natMap: NatMap = {
        [`127.0.0.1:${pair.replication.port}`]: { host: "127.0.0.1", port: toMaster.port },
      };
      const ahead: Clock = { now: () => Date.now() + AHEAD_MS, sleepSync: systemClock.sleepSync };
      const a = await sequenceOn(namespace, natMap, ahead);
      const b = await sequenceOn(namespace, natMap, systemClock);

      // Both draw on M (after the new namespace's fence); R gets M's counters and marker.
      const drawA = drawContinuously(a);
      const drawB = drawContinuously(b);
      closers.push(drawA.stop, drawB.stop);
      await waitUntil(
        "A and B to draw ids on the master",
        () => drawA.ids.length > 2000 && drawB.ids.length > 2000,
        60_000,
      );
      expect(toMaster.connections).toBeGreaterThan(0); // the clients reach M through it
      const masterRunId = await redisInfoField(pair.master.port, "server", "run_id");
      await waitUntil(
        "the replica to have the master's marker",
        async () => (await hashOnReplica(pair.replica.port, keys.marker())).run_id === masterRunId,
      );

      // The replication link is cut: R misses everything A and B draw from now on.
      expect(await redisReplicaInSync(pair.replica.port, pair.replication.port)).toBe(true);
      pair.replication.cutOff();
      const cutAt = performance.now();
      const aIdsAtCut = drawA.ids.length;
      await waitUntil(
        "A and B to draw on the master for a while after the cut",
        () => performance.now() - cutAt > CUT_LEAD_MS,
        60_000,
      );

      // M's host goes silent and M dies; the last second A drew there has a counter R never saw.
      const aOnMaster = drawA.ids.slice(aIdsAtCut);
      const lastA = secondsOf(a, aOnMaster).last;
      expect(
        Number(await redisCommand(pair.master.port, "GET", keys.sequence(lastA))),
      ).toBeGreaterThan(0);
      expect(await redisReplicaCommand(pair.replica.port, "EXISTS", keys.sequence(lastA))).toBe(0);
      const fenceBefore = Number((await redisHash(pair.master.port, keys.marker())).fence);
      const killedAt = performance.now();
      toMaster.cutOff();
      await pair.master.kill();
      // A has no demand until B has asked R: B's first request reaches R before A raises R's
      // high-water second past B's seconds (which would refuse them as well as the fence).
      drawA.paused = true;
      const aIdsAtKill = drawA.ids.length;
      const bIdsAtKill = drawB.ids.length;
      const drawnOnMaster = [...drawA.ids.slice(0, aIdsAtKill), ...drawB.ids.slice(0, bIdsAtKill)];
      const watch = watchFailover(pair.replica.port, [a, b], fenceBefore);
      closers.push(watch.stop);

      // The cluster promotes R by itself; wait until every node still running routes the slots to
      // it.
      const live = nodes.filter((n) => n !== pair.master);
      await waitUntil(
        "every node still running to see the replica serve the master's slots",
        async () => {
          for (const node of live) {
            const owner = (await redisClusterNodes(node.port)).find(
              (n) => n.port === pair.replica.port,
            );
            if (owner?.role !== "master" || owner.slots.join(" ") !== pair.slots.join(" ")) {
              return false;
            }
            const state = String(await redisCommand(node.port, "CLUSTER", "INFO"));
            if (!/cluster_state:ok/.test(state)) return false;
          }
          return true;
        },
        60_000,
      );
      const agreedAt = performance.now();
      expect(await redisInfoField(pair.replica.port, "replication", "second_repl_offset")).not.toBe(
        "-1",
      );

      // Both Cluster clients, made before the failover, find R and draw there once its fence
      // passed.
      await waitUntil(
        "B to hear from the promoted replica",
        () => !Number.isNaN(watch.heardAt[1]!) || drawnAfter(drawB, agreedAt).length > 0,
        60_000,
      );
      drawA.paused = false;
      await waitUntil(
        "A and B to draw ids on the promoted replica",
        () =>
          drawnAfter(drawA, agreedAt).length > 2000 && drawnAfter(drawB, agreedAt).length > 2000,
        60_000,
      ).catch((error: Error) => {
        const heard = watch.heardAt.map((t) => (Number.isNaN(t) ? "never" : "yes")).join(", ");
        const last = [drawA, drawB].map((d) => d.errors.at(-1)?.error.message).join(" | ");
        throw new Error(`${error.message}; heard from R (A, B): ${heard}; last errors: ${last}`);
      });
      await drawA.stop();
      await drawB.stop();
      await watch.stop();
      const markerOnR = await redisHash(pair.replica.port, keys.marker());
      const fence = Number(markerOnR.fence);

      const all = [...drawA.ids, ...drawB.ids];
      const count = countDuplicates([all], 5);
      const s = (ms: number) => `${(ms / 1000).toFixed(1)} s`;
      const [heardA, heardB] = watch.heardAt.map((t) => s(t - watch.promotedAt));
      console.log(
        `cluster failover of ${namespace}: ${count.total} ids, ${count.duplicates} issued twice; ` +
          `R promoted ${s(watch.promotedAt - killedAt)} after the kill, every node agreed ` +
          `${s(agreedAt - watch.promotedAt)} later; A heard from R ${heardA} and B ${heardB} ` +
          `after its promotion; A ${drawA.ids.length} ids (last second on M ${lastA}), ` +
          `B ${drawB.ids.length} ids, first asked R in second ${watch.heardSecond[1]}; fence ` +
          `${fence} (${markerOnR.reason})`,
      );
      expect({ duplicates: count.duplicates, examples: count.examples }).toEqual({
        duplicates: 0,
        examples: [],
      });

      // Detected: R's marker named the dead master's run id; the fence covers every second drawn
      // on M, also A's (its clock ahead), and B's seconds at the promotion were among them.
      expect(markerOnR).toMatchObject({
        reason: "restarted",
        run_id: await redisInfoField(pair.replica.port, "server", "run_id"),
      });
      expect(fence).toBeGreaterThanOrEqual(secondsOf(a, drawnOnMaster).last);
      // B's first request to R was for a second A had drawn on M after the cut.
      expect(watch.heardSecond[1]).toBeLessThanOrEqual(lastA);
      expect(watch.heardSecond[1]).toBeGreaterThanOrEqual(secondsOf(a, aOnMaster).first);
      expect(b.state().stats.refused.fenced + a.state().stats.refused.fenced).toBeGreaterThan(0);

      // Both drew after the failover, on R, only seconds past its fence.
      const aAfter = drawnAfter(drawA, agreedAt);
      const bAfter = drawnAfter(drawB, agreedAt);
      expect(aAfter.length).toBeGreaterThan(2000);
      expect(bAfter.length).toBeGreaterThan(2000);
      expect(secondsOf(a, aAfter).first).toBeGreaterThan(fence);
      expect(secondsOf(b, bAfter).first).toBeGreaterThan(fence);
      expect(watch.heardAt.every((t) => t > watch.promotedAt)).toBe(true);
    },
    TEST_MS,
  );
});
