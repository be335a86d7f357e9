// The stores the servers depend on fail (MariaDB, ZooKeeper, Redis, the network to MariaDB), one
// at a time, each under load on the modes that use it. Every such scenario has one shape, run by
// `outage()`: servers under load, a steady phase, the fault's phases, a recovery wait, then what
// each group of loops must have answered in each phase, plus a few checks of its own.
import { freePort, TcpProxy } from "@leaf/testkit";
import type { LeafProcess } from "./leaf-process";
import {
  allServing,
  codes,
  countCode,
  expectRefused,
  expectServed,
  isServer,
  loadSharedTag,
  loopsOf,
  type Scenario,
  seconds,
  stepLasting,
} from "./scenario-kit";
import { type ScenarioRun, sleep } from "./scenario-run";
import {
  redisOn,
  segmentOff,
  segmentOn,
  serverConfig,
  snowflakeOff,
  snowflakeOn,
} from "./server-configs";

/** What a group of loops must have answered during a phase. */
export interface Answered {
  phase: string;
  /** Which loops (by label: "A segment:...", "B snowflake:..."), and who they are in the text. */
  loops: (label: string) => boolean;
  who: string;
  /**
   * "served": ids and no failure; `refused`: that code at least once (and, with `only`, nothing
   * else).
   */
  answer: "served" | { refused: string; only: boolean };
}

/** `who` got ids and no failure during `phase`. */
export const served = (phase: string, loops: Answered["loops"], who: string): Answered => ({
  phase,
  loops,
  who,
  answer: "served",
});

/** `who` was refused with `code` during `phase` (with `only`: and with nothing else). */
export const refused = (
  phase: string,
  loops: Answered["loops"],
  who: string,
  code: string,
  only: boolean,
): Answered => ({ phase, loops, who, answer: { refused: code, only } });

/** A scenario's servers, fault and expectations, made once its stores are known. */
export interface OutagePlan {
  /** The fault's phases, in order (the fault, then e.g. the store starting again). */
  fault: Array<{ phase: string; run(): Promise<void> }>;
  /** The recovery phase: resolves with the ms until ids came again, or undefined. */
  recovery?: { phase: string; wait(): Promise<number | undefined>; text: string };
  answered: Answered[];
  /** Checks of its own, after the others; returns the scenario's one-line summary. */
  after(back: number | undefined): Promise<string>;
  /** Length of the last phase, "steady after" (default 2 s). */
  settleMs?: number;
}

/** A store outage: a scenario whose `plan` sets up servers and load and returns the rest. */
export interface Outage extends Omit<Scenario, "run"> {
  plan(s: ScenarioRun): Promise<OutagePlan>;
}

/** Runs an outage: steady, the fault's phases, recovery, steady after, then every check. */
export function outage(o: Outage): Scenario {
  const { plan, ...scenario } = o;
  return {
    ...scenario,
    async run(s) {
      const p = await plan(s);
      await s.phase("steady", () => sleep(3000));
      for (const step of p.fault) await s.phase(step.phase, step.run);
      const back = p.recovery ? await s.phase(p.recovery.phase, p.recovery.wait) : undefined;
      for (const a of p.answered) {
        if (a.answer === "served") expectServed(s, a.phase, a.loops, a.who);
        else if (a.answer.only) expectRefused(s, a.phase, a.loops, a.answer.refused, a.who);
        else {
          const t = s.phaseTotals(a.phase, a.loops);
          const n = countCode(t.errors, a.answer.refused);
          s.expect(
            n > 0,
            `${a.who} answered ${a.answer.refused} during "${a.phase}" (x${n}; ${codes(t.errors)})`,
          );
        }
      }
      if (p.recovery) s.expect(back !== undefined, `${p.recovery.text} (within ${seconds(back)})`);
      const summary = await p.after(back);
      await s.phase("steady after", () => sleep(p.settleMs ?? 2000));
      return summary;
    },
  };
}

const segmentLoops = (label: string) => label.includes(" segment:");
const snowflakeOf = (server: LeafProcess) => (label: string) =>
  label.startsWith(`${server.label} snowflake:`);
const every = () => true;

/** Two servers on one segment tag: A with snowflake on `registryA`, B on `registryB`. */
async function twoOnMariadb(
  s: ScenarioRun,
  rangeSeconds: number,
  registryA: "mysql" | "mysql-lease",
  registryB: "mysql" | "mysql-lease",
) {
  const name = s.unique("svc");
  const db = await s.ctx.services.segmentDatabase([
    { tag: name, step: stepLasting(s.rate / 4, rangeSeconds) },
  ]);
  s.onCleanup(() => db.close());
  const make = (label: string, registry: "mysql" | "mysql-lease") => {
    const service = registry === "mysql" ? name : `${name}-lease`;
    return freePort().then((port) =>
      s.server(
        label,
        port,
        serverConfig(
          service,
          segmentOn(db.url, { dynamicStep: false }),
          snowflakeOn(registry, { mysqlUrl: db.url }),
        ),
      ),
    );
  };
  const a = await make("A", registryA);
  const b = await make("B", registryB);
  await s.startAll(a, b);
  const space = (r: string) => (r === "mysql" ? `snowflake:${name}` : `snowflake:${name}-lease`);
  loadSharedTag(s, db, name, `segment:${name}`, [
    [a, space(registryA)],
    [b, space(registryB)],
  ]);
  return { name, db, a, b, mysql: s.ctx.services.requireMysql() };
}

// ---- MariaDB
// ----------------------------------------------------------------------------------------

export const mariadbKill = outage({
  name: "mariadb-kill",
  kind: "MariaDB",
  title:
    "MariaDB SIGKILLed for 6 s and restarted, under segment load (ranges sized to outlast it) and snowflake on the mysql registry (fixed and lease)",
  documented:
    "Segment ids keep coming from the loaded ranges, range loads retry with backoff and succeed once MariaDB is back; " +
    "snowflake on the mysql registry keeps issuing (fixed: the id stays; lease: fences only after leaseMs - margin = 48 s without renewal); no id repeated.",
  needs: { mysql: true },
  plannedSeconds: 40,
  short: false,
  async plan(s) {
    const { name, db, a, b, mysql } = await twoOnMariadb(s, 15, "mysql", "mysql-lease");
    let maxAtKill = 0n;
    let reloadedTo: bigint | undefined;
    const phases = ["MariaDB SIGKILLed, down 6 s", "MariaDB starting"];
    return {
      fault: [
        {
          phase: phases[0]!,
          async run() {
            maxAtKill = await db.maxId(name);
            await mysql.kill();
            await sleep(6000);
          },
        },
        { phase: phases[1]!, run: () => mysql.start() },
      ],
      recovery: {
        phase: "segment ranges load again",
        text: "segment ranges were taken again after MariaDB came back",
        async wait() {
          const start = performance.now();
          while (performance.now() - start < 45_000) {
            const max = await db.maxId(name).catch(() => undefined);
            if (max !== undefined && max > maxAtKill) {
              reloadedTo = max;
              return performance.now() - start;
            }
            await sleep(250);
          }
          return undefined;
        },
      },
      answered: phases.flatMap((phase) =>
        [a, b].map((server) => served(phase, isServer(server), server.label)),
      ),
      async after(back) {
        s.note(`max_id ${maxAtKill} at the kill, ${reloadedTo ?? "unchanged"} after the restart`);
        return `no failed request during the outage; ranges loaded again ${seconds(back)} after MariaDB answered`;
      },
    };
  },
});

export const mariadbPause = outage({
  name: "mariadb-pause",
  kind: "MariaDB",
  title:
    "MariaDB paused (SIGSTOP) for 8 s, far longer than the segment buffer lasts (ranges of about 0.5 s of load)",
  documented:
    "Ids come from the loaded ranges until both are used up; then requests wait at most exhaustedWaitMs (1 s) and fail with " +
    "SEGMENTS_EXHAUSTED (503, Leaf code -3), never spinning; ids resume once MariaDB answers, increasing, no id repeated.",
  needs: { mysql: true },
  plannedSeconds: 20,
  short: true,
  async plan(s) {
    const name = s.unique("svc");
    const db = await s.ctx.services.segmentDatabase([
      { tag: name, step: stepLasting(s.rate / 2, 0.5) },
    ]);
    s.onCleanup(() => db.close());
    const mysql = s.ctx.services.requireMysql();
    const config = serverConfig(name, segmentOn(db.url, { dynamicStep: false }), snowflakeOff());
    const a = s.server("A", await freePort(), config);
    const b = s.server("B", await freePort(), config);
    await s.startAll(a, b);
    const space = `segment:${name}`;
    s.segmentSpace(space, db, name);
    s.startLoad([
      ...loopsOf(a, { segment: { tag: name, space } }),
      ...loopsOf(b, { segment: { tag: name, space } }),
    ]);
    const paused = "MariaDB paused 8 s";
    return {
      fault: [{ phase: paused, run: () => pauseFor(mysql, 8000) }],
      recovery: {
        phase: "MariaDB resumed: recovery",
        text: "both servers issue ids again after MariaDB resumed",
        wait: () => allServing(s, [a, b], 30_000),
      },
      // Once the buffer was used up; nothing else: no hang past exhaustedWaitMs, no 500.
      answered: [refused(paused, every, "the servers", "SEGMENTS_EXHAUSTED", true)],
      async after(back) {
        const t = s.phaseTotals(paused, every);
        return `-3 x${countCode(t.errors, "SEGMENTS_EXHAUSTED")} while paused; ids again ${seconds(back)} after resume`;
      },
    };
  },
});

export const mariadbPausePastLease = outage({
  name: "mariadb-pause-past-lease",
  kind: "MariaDB",
  title:
    "MariaDB paused (SIGSTOP) for 56 s: past the segment buffer and past the mysql lease registry's fence point (48 s)",
  documented:
    "Segment fails with -3 once its ranges are used up; the lease registry's holder fences itself (LEASE_LOST, Leaf code -4) " +
    "leaseMs - safetyMarginMs (48 s) after its last renewal, before anyone may take its id; the fixed registry keeps issuing; " +
    "everything recovers after MariaDB resumes; no id repeated.",
  needs: { mysql: true },
  plannedSeconds: 75,
  short: false,
  async plan(s) {
    const { a, b, mysql } = await twoOnMariadb(s, 5, "mysql-lease", "mysql");
    const paused = "MariaDB paused 56 s";
    let pausedAt = 0;
    return {
      fault: [
        {
          phase: paused,
          run: () => {
            pausedAt = s.now();
            return pauseFor(mysql, 56_000);
          },
        },
      ],
      recovery: {
        phase: "MariaDB resumed: recovery",
        text: "lease snowflake and segment on both servers issue ids again after the resume",
        async wait() {
          const waits = await Promise.all([
            allServing(s, [a], 60_000, "snowflake"),
            allServing(s, [a, b], 60_000, "segment"),
          ]);
          return waits.every((w) => w !== undefined) ? Math.max(...(waits as number[])) : undefined;
        },
      },
      answered: [
        refused(paused, snowflakeOf(a), "the lease holder (A) fenced itself:", "LEASE_LOST", false),
        served(paused, snowflakeOf(b), "the fixed registry's server (B, snowflake)"),
        refused(paused, segmentLoops, "segment, its ranges used up,", "SEGMENTS_EXHAUSTED", false),
      ],
      async after(back) {
        const lost = countCode(s.phaseTotals(paused, snowflakeOf(a)).errors, "LEASE_LOST");
        const fencedAt = s.changes.find(
          (c) => c.server === "A" && /snowflake fenced/.test(c.what) && c.atMs >= pausedAt,
        );
        const at = fencedAt ? seconds(fencedAt.atMs - pausedAt) : undefined;
        s.note(`A's monitor showed the lease fenced ${at ?? "(not seen)"} after the pause began`);
        return `lease fenced (-4 x${lost}) at ${at ?? "?"}; fixed registry unaffected; all back ${seconds(back)} after resume`;
      },
    };
  },
});

// ---- ZooKeeper
// --------------------------------------------------------------------------------------

export function zookeeperFault(fault: "kill" | "pause", short: boolean): Scenario {
  const faultPhase = fault === "kill" ? "ZooKeeper SIGKILLed, down 8 s" : "ZooKeeper paused 10 s";
  return outage({
    name: `zookeeper-${fault}`,
    kind: "ZooKeeper",
    title:
      fault === "kill"
        ? "ZooKeeper SIGKILLed for 8 s (past the 6 s session timeout) and restarted, under snowflake load in normal and recycle mode"
        : "ZooKeeper paused (SIGSTOP) for 10 s, past the 6 s session timeout, under snowflake load in normal and recycle mode",
    documented:
      "Normal mode keeps issuing (the id belongs to ip:port; reports fail and are retried). Recycle mode must fence: once " +
      "ZooKeeper is silent for silenceLimitMs (2/3 of the session timeout) ids are refused with LEASE_LOST (Leaf code -4) " +
      "until a new lease is taken; both serve again afterwards; no id repeated.",
    needs: { zookeeper: true },
    plannedSeconds: 30,
    short,
    async plan(s) {
      const zookeeper = s.ctx.services.requireZookeeper();
      const normalName = s.unique("normal");
      const recycleName = s.unique("recycle");
      const a = s.server(
        "A",
        await freePort(),
        serverConfig(normalName, segmentOff(), snowflakeOn("zk", { zookeeper: zookeeper.url })),
      );
      const b = s.server(
        "B",
        await freePort(),
        serverConfig(
          recycleName,
          segmentOff(),
          snowflakeOn("zk-recycle", { zookeeper: zookeeper.url }),
        ),
      );
      await s.startAll(a, b);
      s.snowflakeSpace(`snowflake:${normalName}`, [a]);
      s.snowflakeSpace(`snowflake:${recycleName}`, [b]);
      s.startLoad([
        ...loopsOf(a, { snowflake: { space: `snowflake:${normalName}` } }),
        ...loopsOf(b, { snowflake: { space: `snowflake:${recycleName}` } }),
      ]);
      let before: number | undefined;
      let faultAt = 0;
      return {
        fault: [
          {
            phase: faultPhase,
            async run() {
              before = (await s.snowflakeState(b))?.workerId;
              faultAt = s.now();
              if (fault === "kill") {
                await zookeeper.kill();
                await sleep(8000);
              } else await pauseFor(zookeeper, 10_000);
            },
          },
          ...(fault === "kill"
            ? [{ phase: "ZooKeeper starting", run: () => zookeeper.start() }]
            : []),
        ],
        recovery: {
          phase: "recovery",
          text: "recycle mode (B) took a new lease and issues ids again after ZooKeeper was back",
          wait: () => s.waitForIds(b, 60_000),
        },
        // Normal mode keeps issuing; recycle mode fences, with LEASE_LOST (-4) only.
        answered: [
          served(faultPhase, isServer(a), "normal mode (A)"),
          refused(faultPhase, isServer(b), "recycle mode (B)", "LEASE_LOST", true),
        ],
        settleMs: 3000,
        async after(back) {
          await s.poll();
          const after = (await s.snowflakeState(b))?.workerId;
          const lost = countCode(s.phaseTotals(faultPhase, isServer(b)).errors, "LEASE_LOST");
          const firstLost = Object.entries(
            s.load.reports().find((r) => r.server === "B")?.errors ?? {},
          )
            .filter(([key]) => key.split(" ")[1] === "LEASE_LOST")
            .map(([, tally]) => tally.firstAtMs)
            .sort((x, y) => x - y)[0];
          const lostIn = firstLost === undefined ? undefined : seconds(firstLost - faultAt);
          if (lostIn) s.note(`B's first LEASE_LOST answer came ${lostIn} after the fault began`);
          s.note(`B held worker id ${before} before and ${after} after`);
          return `normal kept issuing; recycle fenced (-4 x${lost}) ${lostIn ?? "?"} in, re-leased ${seconds(back)} after ZooKeeper was back (worker ${before} -> ${after})`;
        },
      };
    },
  });
}

// ---- Redis
// ------------------------------------------------------------------------------------------

export const redisKill = outage({
  name: "redis-kill",
  kind: "Redis",
  title:
    "Redis SIGKILLed for 3 s and restarted empty (no persistence), two servers taking ids of the same shard",
  documented:
    "Cached ranges of the current second keep serving, then UNAVAILABLE (503); the restarted, empty Redis is detected " +
    "(run-id marker) and every second that may have been handed out is fenced, so callers wait 2-3 s and no id is repeated.",
  needs: { redis: true },
  plannedSeconds: 20,
  short: true,
  async plan(s) {
    const redis = s.ctx.services.requireRedis();
    const name = s.unique("seq");
    const config = serverConfig(name, segmentOff(), snowflakeOff(), redisOn(redis.url, name));
    const c = s.server("C", await freePort(), config);
    const d = s.server("D", await freePort(), config);
    await s.startAll(c, d);
    const space = `redisSequence:${name}`;
    // The same shard on both servers: with the counters lost, only the fence keeps ids apart.
    s.redisSpace(space, [7]);
    s.startLoad([
      ...loopsOf(c, { redis: { shard: 7, space } }),
      ...loopsOf(d, { redis: { shard: 7, space } }),
    ]);
    const down = "Redis SIGKILLed, down 3 s";
    return {
      fault: [
        {
          phase: down,
          async run() {
            await redis.kill();
            await sleep(3000);
          },
        },
        { phase: "Redis starting (empty)", run: () => redis.start() },
      ],
      recovery: {
        phase: "recovery",
        text: "both servers issue ids again after Redis restarted empty",
        wait: () => allServing(s, [c, d], 30_000),
      },
      answered: [refused(down, every, "the servers", "UNAVAILABLE", true)],
      async after(back) {
        const fenced = s.changes
          .filter((ch) => /redis fenced/.test(ch.what))
          .map((ch) => ch.server);
        s.note(
          `servers whose monitor showed the redis sequence fenced after the restart: ${[...new Set(fenced)].join(", ") || "none seen (the fence may pass between polls)"}`,
        );
        return `UNAVAILABLE while down; ids again ${seconds(back)} after the empty Redis answered`;
      },
    };
  },
});

// ---- network
// ----------------------------------------------------------------------------------------

export const slowNetwork = outage({
  name: "slow-network",
  kind: "network",
  title:
    "200 ms added to every chunk between the servers and MariaDB (a TCP proxy) for 10 s, under segment load and snowflake on the mysql registry",
  documented:
    "The double buffer loads the next range when 10% of the current one is used, so a slow database delays loads, not ids: " +
    "no request fails while a range lasts longer than a load takes; registry reports are asynchronous; no id repeated.",
  needs: { mysql: true },
  plannedSeconds: 20,
  short: true,
  async plan(s) {
    const mysql = s.ctx.services.requireMysql();
    const proxy = await TcpProxy.start({ targetPort: mysql.port });
    s.onCleanup(() => proxy.close());
    const name = s.unique("svc");
    const db = await s.ctx.services.segmentDatabase([
      { tag: name, step: stepLasting(s.rate / 4, 6) },
    ]);
    s.onCleanup(() => db.close());
    const viaProxy = db.urlVia(proxy.port);
    const config = serverConfig(
      name,
      segmentOn(viaProxy, { dynamicStep: false }),
      snowflakeOn("mysql", { mysqlUrl: viaProxy }),
    );
    const a = s.server("A", await freePort(), config);
    const b = s.server("B", await freePort(), config);
    await s.startAll(a, b);
    const spaces = { segment: `segment:${name}`, snowflake: `snowflake:${name}` };
    s.segmentSpace(spaces.segment, db, name);
    s.snowflakeSpace(spaces.snowflake, [a, b]);
    s.startLoad(
      [a, b].flatMap((server) =>
        loopsOf(server, {
          segment: { tag: name, space: spaces.segment },
          snowflake: { space: spaces.snowflake },
        }),
      ),
    );
    const slow = "200 ms per chunk to and from MariaDB";
    let maxBefore = 0n;
    let chunksBefore = 0;
    return {
      fault: [
        {
          phase: slow,
          async run() {
            maxBefore = await db.maxId(name);
            chunksBefore = proxy.delayedChunks;
            proxy.setDelay(200);
            try {
              await sleep(10_000);
            } finally {
              proxy.setDelay(0);
            }
          },
        },
      ],
      answered: [served(slow, every, "every server")],
      async after() {
        const maxAfter = await db.maxId(name);
        const chunks = proxy.delayedChunks - chunksBefore;
        s.expect(
          chunks > 0,
          `the servers' database traffic went through the delaying proxy (${chunks} chunks delayed 200 ms)`,
        );
        s.expect(
          maxAfter > maxBefore,
          `segment ranges were loaded over the slow link (max_id ${maxBefore} -> ${maxAfter})`,
        );
        return `no failed request; ${chunks} chunks delayed; ranges loaded over the slow link`;
      },
    };
  },
});

/** SIGSTOPs a store for `ms`, then SIGCONT (also when interrupted). */
export async function pauseFor(
  store: { pause(): void; resume(): void },
  ms: number,
): Promise<void> {
  store.pause();
  try {
    await sleep(ms);
  } finally {
    store.resume();
  }
}
