// Two servers competing for one worker id (a layout with workerBits 0): the holder loses its lease
// while it cannot know it (SIGSTOPped; or connected only to a ZooKeeper follower cut off from the
// quorum), the other server takes the id, and the holder must not issue one more id under it.
// Both servers' ids share one space, so any id issued twice is counted.
import { defineLayout, layouts } from "@leaf/core";
import { freePort, startZookeeperEnsemble } from "@leaf/testkit";
import type { LeafProcess, StartOutcome } from "./leaf-process";
import { errorCode } from "./load-driver";
import { QueuedRequests } from "./pipelined";
import {
  codes,
  countCode,
  expectServed,
  isServer,
  lastWords,
  loopsOf,
  loopsOfServer,
  onlyCode,
  type Scenario,
  seconds,
} from "./scenario-kit";
import { type ScenarioRun, sleep } from "./scenario-run";
import { segmentOff, serverConfig, snowflakeOn } from "./server-configs";

/** The servers' layout here: Leaf's with no worker-id bits, so worker id 0 is the only one. */
export const ONE_ID = defineLayout({ ...layouts.leaf, name: "leaf, workerBits 0", workerBits: 0 });

/** The mysql lease (the holder fences at 4/5 of it) and the ZooKeeper session, short. */
const LEASE_MS = 3000;
const SESSION_MS = 2000;

/**
 * Starts `b` again and again until it starts (it is refused while the worker id is held) or
 * `timeoutMs` passes; the refused attempts and the last outcome.
 */
export async function startWhenFree(
  b: LeafProcess,
  timeoutMs: number,
): Promise<{ outcome: StartOutcome; refused: number; firstRefusal: string | undefined }> {
  const deadline = performance.now() + timeoutMs;
  let refused = 0;
  let firstRefusal: string | undefined;
  for (;;) {
    const outcome = await b.tryStart();
    if (outcome.started || performance.now() > deadline) return { outcome, refused, firstRefusal };
    refused++;
    firstRefusal ??= `exit code ${outcome.code}, "${lastWords(outcome.output)}"`;
    await sleep(200);
  }
}

/** ms of the tick of a one-id snowflake id. */
const tickOf = (id: bigint | undefined) =>
  id === undefined ? undefined : ONE_ID.decompose(id).timestampMs;

/**
 * Checks that every id `a` issued is below every id `b` issued: under one worker id, ids order by
 * time, so `a` stopped issuing before `b` began (the fence came first).
 */
export function expectFencedFirst(
  s: ScenarioRun,
  a: LeafProcess,
  b: LeafProcess,
  extra = 0n,
): void {
  const fromA = s.load.idRange(loopsOfServer(a));
  let highestA = extra;
  if (fromA.highest !== undefined && fromA.highest > highestA) highestA = fromA.highest;
  const lowestB = s.load.idRange(loopsOfServer(b)).lowest;
  const gap = (tickOf(lowestB) ?? 0) - (tickOf(highestA) ?? 0);
  s.expect(
    lowestB !== undefined && highestA < lowestB,
    `every id of ${a.label} is below every id of ${b.label} (${a.label}'s last id at tick ${tickOf(highestA)}, ${b.label}'s first at ${tickOf(lowestB)}: ${gap} ms apart)`,
  );
}

// ---- a holder paused (SIGSTOP) past its lease
// ------------------------------------------------------

export function processPause(registry: "mysql-lease" | "zk-recycle"): Scenario {
  const lease =
    registry === "mysql-lease"
      ? `its ${LEASE_MS / 1000} s lease`
      : `its ${SESSION_MS / 1000} s session`;
  return {
    name: `process-pause:${registry}`,
    kind: "process",
    title: `Two snowflake servers sharing one worker id (workerBits 0, ${registry} registry): the holder SIGSTOPped past ${lease} while the other takes the id, then SIGCONT with requests queued in its sockets`,
    documented:
      "The other server's start is refused while the id is held, and succeeds once the lease (or session) ends. " +
      "The paused holder issues no id past its fence point (fenceAt, checked after every clock wait and tick change; " +
      "batches yield between chunks): after SIGCONT it answers LEASE_LOST (503, Leaf code -4), also to the requests that " +
      "waited in its sockets, never an id under the lost lease; once the other server stops it takes the id again; no id repeated.",
    needs: registry === "mysql-lease" ? { mysql: true } : { zookeeper: true },
    plannedSeconds: 30,
    short: false,
    async run(s) {
      const name = s.unique("pause");
      let mysqlUrl: string | undefined;
      if (registry === "mysql-lease") {
        const db = await s.ctx.services.segmentDatabase([]);
        s.onCleanup(() => db.close());
        mysqlUrl = db.url;
      }
      const zookeeper =
        registry === "zk-recycle" ? s.ctx.services.requireZookeeper().url : undefined;
      const config = serverConfig(
        name,
        segmentOff(),
        snowflakeOn(
          registry,
          { mysqlUrl, zookeeper },
          { workerBits: 0, leaseMs: LEASE_MS, sessionTimeoutMs: SESSION_MS },
        ),
      );
      const a = s.server("A", await freePort(), config);
      const b = s.server("B", await freePort(), config);
      await s.startAll(a);
      const space = `snowflake:${name}`;
      s.snowflakeSpace(space, [a, b], ONE_ID);
      // Requests to A wait out the pause (30 s limit): they are answered when A resumes.
      s.startLoad(loopsOf(a, { snowflake: { space } }), 30_000);
      await s.phase("steady (A holds worker id 0)", () => sleep(3000));
      const early = await s.phase("B starting while A holds the id", () => b.tryStart());
      s.expect(
        !early.started && early.code === 1,
        `B's start was refused while A held the only worker id (${early.started ? "it STARTED" : `exit code ${early.code}: "${lastWords(early.output)}"`})`,
      );
      const queued = await QueuedRequests.open(a.port, 4);
      s.onCleanup(() => queued.close());
      const pausedAt = s.now();
      const takeover = await s.phase("A paused (SIGSTOP) until B holds the id", async () => {
        a.pause();
        const started = await startWhenFree(b, 60_000);
        if (started.outcome.started) {
          s.addLoad(loopsOf(b, { snowflake: { space } }));
          await s.waitForIds(b, 20_000, "snowflake", 1000);
        }
        // Single ids and batches of 5,000 wait in A's sockets, A's own loop's request too.
        queued.queue("/api/snowflake/get/chaos", 200);
        queued.queue("/api/snowflake/get/chaos?count=5000", 4);
        await sleep(200);
        return { ...started, atMs: s.now() - pausedAt };
      });
      s.expect(
        takeover.outcome.started,
        `B started once A's ${registry === "mysql-lease" ? "lease" : "session"} ended (${seconds(takeover.atMs)} into the pause, after ${takeover.refused} refused start(s): ${takeover.firstRefusal ?? "none"})`,
      );
      const afterResume = await s.phase("A resumed (SIGCONT) with B serving", async () => {
        a.resume();
        const outcomes = await queued.settle(30_000);
        await sleep(3000);
        return outcomes;
      });
      // The queued requests' ids count like any other.
      const queuedErrors: Record<string, number> = {};
      let queuedIds = 0;
      let highestQueued = 0n;
      for (const outcome of afterResume) {
        if ("failed" in outcome) {
          queuedErrors.NO_ANSWER = (queuedErrors.NO_ANSWER ?? 0) + 1;
          continue;
        }
        const { status, body } = outcome.answer;
        if (status !== 200) {
          const code = errorCode(status, body);
          queuedErrors[code] = (queuedErrors[code] ?? 0) + 1;
          continue;
        }
        const ids = body.split("\n").filter(Boolean).map(BigInt);
        s.recorder.add(space, ids);
        queuedIds += ids.length;
        for (const id of ids) if (id > highestQueued) highestQueued = id;
      }
      s.expect(
        queuedIds === 0 &&
          countCode(queuedErrors, "LEASE_LOST") > 0 &&
          onlyCode(queuedErrors, "LEASE_LOST"),
        `A answered the ${afterResume.length} requests queued in its sockets with LEASE_LOST (-4) only, no id (${queuedIds} ids; ${codes(queuedErrors)})`,
      );
      const resumed = s.phaseTotals("A resumed (SIGCONT) with B serving", isServer(a));
      s.expect(
        resumed.ids === 0 && onlyCode(resumed.errors, "LEASE_LOST"),
        `A's own clients got no id after SIGCONT, only LEASE_LOST (${resumed.ids} ids; ${codes(resumed.errors)})`,
      );
      expectFencedFirst(s, a, b, highestQueued);
      expectServed(s, "A resumed (SIGCONT) with B serving", isServer(b), "B");
      const back = await s.phase("B stopped (SIGTERM): A takes the id again", async () => {
        await b.stop();
        return s.waitForIds(a, 30_000);
      });
      s.expect(
        back !== undefined,
        `A took the worker id again and issues ids (${seconds(back)} after B stopped)`,
      );
      await s.phase("steady after", () => sleep(2000));
      return `B held the id ${seconds(takeover.atMs)} into A's pause; after SIGCONT A answered ${codes(queuedErrors)} to its queued requests, ${queuedIds + resumed.ids} ids; A serving again ${seconds(back)} after B stopped`;
    },
  };
}

// ---- a ZooKeeper follower partitioned from the quorum
// ----------------------------------------------

/** ZooKeeper's tick here: the cut-off follower answers reads for syncLimit ticks (5 s). */
const ENSEMBLE = { tickTime: 200, syncLimit: 25, maxSessionTimeout: 20_000 };

export const zookeeperPartition: Scenario = {
  name: "zookeeper-partition",
  kind: "ZooKeeper",
  title:
    "A 3-server ZooKeeper ensemble (quorum links through TCP proxies); server A (recycle mode, one worker id) connected only to a follower that is cut off from the leader and the other follower, server B on the healthy side",
  documented:
    "The cut-off follower keeps answering reads from its own copy for syncLimit ticks (5 s), but only answers that prove " +
    "the leader saw A's session (a write, or sync then a read) renew A's fence: A refuses ids with LEASE_LOST (-4) from its " +
    "fenceAt, before the leader expires its session (2 s) and lets B take worker id 0; after the heal A stays fenced while " +
    "B holds the id; no id repeated.",
  needs: {},
  plannedSeconds: 30,
  short: false,
  async run(s) {
    const ensemble = await startZookeeperEnsemble(ENSEMBLE);
    s.onCleanup(() => ensemble.dispose());
    const leader = await ensemble.leader();
    const cut = (leader + 1) % 3;
    const healthy = [0, 1, 2].filter((i) => i !== cut);
    const name = s.unique("partition");
    const config = (address: string) =>
      serverConfig(
        name,
        segmentOff(),
        snowflakeOn(
          "zk-recycle",
          { zookeeper: address },
          { workerBits: 0, sessionTimeoutMs: SESSION_MS },
        ),
      );
    const a = s.server("A", await freePort(), config(ensemble.connectStringOf([cut])));
    const b = s.server("B", await freePort(), config(ensemble.connectStringOf(healthy)));
    await s.startAll(a);
    const space = `snowflake:${name}`;
    s.snowflakeSpace(space, [a, b], ONE_ID);
    s.startLoad(loopsOf(a, { snowflake: { space } }));
    // Past A's first report; the cut lands anywhere in a report period.
    await s.phase("steady (A holds worker id 0 through a follower)", () =>
      sleep(3000 + Math.floor(Math.random() * 3000)),
    );
    const cutAt = s.now();
    const takeover = await s.phase(
      `follower ${cut + 1} cut off from the quorum until B holds the id`,
      async () => {
        ensemble.isolate(cut);
        const started = await startWhenFree(b, 60_000);
        if (started.outcome.started) {
          s.addLoad(loopsOf(b, { snowflake: { space } }));
          await s.waitForIds(b, 20_000, "snowflake", 1000);
        }
        await sleep(2000);
        return { ...started, atMs: s.now() - cutAt };
      },
    );
    s.expect(
      takeover.outcome.started,
      `B took worker id 0 once the leader expired A's session (${seconds(takeover.atMs)} after the cut, ${takeover.refused} refused start(s) before)`,
    );
    const aErrors = s.load.reports().find((r) => r.server === "A")?.errors ?? {};
    const firstLost = Object.entries(aErrors)
      .filter(([key]) => key.split(" ")[1] === "LEASE_LOST")
      .map(([, tally]) => tally.firstAtMs)
      .sort((x, y) => x - y)[0];
    s.expect(
      firstLost !== undefined,
      `A fenced itself: LEASE_LOST (-4) ${firstLost === undefined ? "never seen" : `${seconds(firstLost - cutAt)} after the cut`}`,
    );
    expectFencedFirst(s, a, b);
    await s.phase("partition healed", async () => {
      ensemble.heal();
      await ensemble.waitUntilServing(60_000);
      await sleep(3000);
    });
    const healed = s.phaseTotals("partition healed", isServer(a));
    s.expect(
      healed.ids === 0,
      `after the heal A issues no id while B holds the only one (${codes(healed.errors)})`,
    );
    expectServed(s, "partition healed", isServer(b), "B");
    return `A fenced ${firstLost === undefined ? "?" : seconds(firstLost - cutAt)} after the cut, B held the id ${seconds(takeover.atMs)} after it`;
  },
};
