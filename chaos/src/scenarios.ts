// The faults, one scenario each, injected while load runs: what is broken, for how long, and the
// behaviour the packages' READMEs document for it, checked against what the processes did.
import { freePort } from "@leaf/testkit";
import type { LeafProcess, StartOutcome } from "./leaf-process";
import type { LoopTarget } from "./load-driver";
import { type ScenarioRun, sleep } from "./scenario-run";
import {
  type RegistryKind,
  redisOn,
  segmentOff,
  segmentOn,
  serverConfig,
  snowflakeOff,
  snowflakeOn,
} from "./server-configs";
import type { SegmentDatabase, ServiceNeeds } from "./services";
import { SlowProxy } from "./tcp-proxy";

/** The kinds of fault the issue names; the short form runs one scenario of each. */
export type FaultKind = "process" | "MariaDB" | "ZooKeeper" | "Redis" | "clock" | "network";

/** A scenario. */
export interface Scenario {
  /** Stable id: "sigkill-restart:zk". */
  name: string;
  kind: FaultKind;
  /** What is done, in one sentence. */
  title: string;
  /** The behaviour the documentation promises, which the checks hold the processes to. */
  documented: string;
  needs: ServiceNeeds & { faketime?: boolean };
  /** Seconds the phases take (sets the pace of the load). */
  plannedSeconds: number;
  /** Part of the short form (CI). */
  short: boolean;
  /** Runs the phases and checks; returns a one-line summary of what the processes did. */
  run(s: ScenarioRun): Promise<string>;
}

const seconds = (ms: number | undefined) =>
  ms === undefined ? "-" : `${(ms / 1000).toFixed(1)} s`;

/** Registries whose worker id is fixed per ip:port (a restart gets the same id back). */
const FIXED_ID: Record<RegistryKind, boolean> = {
  zk: true,
  "zk-recycle": false,
  mysql: true,
  "mysql-lease": false,
  local: true,
};

function registryNeeds(registry: RegistryKind): ServiceNeeds {
  return registry === "zk" || registry === "zk-recycle"
    ? { zookeeper: true }
    : registry === "local"
      ? {}
      : { mysql: true };
}

/** Where a server's registry keeps its worker id. */
function place(
  s: ScenarioRun,
  registry: RegistryKind,
  db: SegmentDatabase | undefined,
  localId: number,
) {
  return {
    zookeeper: registry.startsWith("zk") ? s.ctx.services.requireZookeeper().url : undefined,
    mysqlUrl: registry.startsWith("mysql") ? db?.url : undefined,
    localWorkerId: localId,
  };
}

/**
 * Load on one segment tag from every server, plus snowflake load on each server's own id space
 * (servers with different registries issue under different leaf names).
 */
function loadSharedTag(
  s: ScenarioRun,
  db: SegmentDatabase,
  tag: string,
  segmentSpace: string,
  servers: [LeafProcess, string][],
): void {
  s.segmentSpace(segmentSpace, db, tag);
  for (const [server, space] of servers) s.snowflakeSpace(space, [server]);
  s.startLoad(
    servers.flatMap(([server, space]) =>
      loopsOf(server, { segment: { tag, space: segmentSpace }, snowflake: { space } }),
    ),
  );
}

/** Loops of one server: one per mode it serves. */
function loopsOf(
  server: LeafProcess,
  modes: {
    segment?: { tag: string; space: string };
    snowflake?: { space: string; increasing?: boolean };
    redis?: { shard: number; space: string };
  },
): LoopTarget[] {
  const loops: LoopTarget[] = [];
  if (modes.segment) {
    loops.push({
      server,
      endpoint: { mode: "segment", tag: modes.segment.tag },
      space: modes.segment.space,
      increasing: true,
    });
  }
  if (modes.snowflake) {
    loops.push({
      server,
      endpoint: { mode: "snowflake", key: "chaos" },
      space: modes.snowflake.space,
      increasing: modes.snowflake.increasing ?? true,
    });
  }
  if (modes.redis) {
    loops.push({
      server,
      endpoint: { mode: "redisSequence", shard: modes.redis.shard },
      space: modes.redis.space,
      increasing: false,
    });
  }
  return loops;
}

/** A segment step whose range lasts about `seconds` at `idsPerSecond`. */
function stepLasting(idsPerSecond: number, seconds: number): number {
  return Math.max(50, Math.round(idsPerSecond * seconds));
}

/** Failures of `code` ("503 LEASE_LOST (-4)" counts for "LEASE_LOST"), summed. */
function countCode(errors: Record<string, number>, code: string): number {
  return Object.entries(errors)
    .filter(([key]) => key.split(" ")[1] === code)
    .reduce((sum, [, n]) => sum + n, 0);
}

/** Whether every failure in `errors` has `code`. */
function onlyCode(errors: Record<string, number>, code: string): boolean {
  return Object.keys(errors).every((key) => key.split(" ")[1] === code);
}

const isServer = (server: LeafProcess) => (label: string) => label.startsWith(`${server.label} `);
const codes = (errors: Record<string, number>) =>
  Object.entries(errors)
    .map(([code, n]) => `${code} x${n}`)
    .join(", ") || "none";

// ---- a server process SIGKILLed and restarted -----------------------------------------------------

function sigkillRestart(registry: RegistryKind, short: boolean): Scenario {
  return {
    name: `sigkill-restart:${registry}`,
    kind: "process",
    title: `SIGKILL of one of two servers (segment, snowflake on the ${registry} registry, redis sequence) under load, then its restart`,
    documented:
      "The other server keeps answering; the killed one refuses connections until restarted, then serves every mode again " +
      (FIXED_ID[registry]
        ? "with the same worker id (fixed per ip:port); "
        : "with a free worker id (the dead holder's id stays taken until its lease or session ends); ") +
      "no id is repeated, segment ids keep increasing per process.",
    needs: { mysql: true, redis: true, ...registryNeeds(registry) },
    plannedSeconds: 30,
    short,
    async run(s) {
      const name = s.unique("svc");
      const perLoop = s.rate / 6;
      const db = await s.ctx.services.segmentDatabase([
        { tag: name, step: stepLasting(perLoop, 5) },
      ]);
      s.onCleanup(() => db.close());
      const redisUrl = s.ctx.services.requireRedis().url;
      const [portA, portB] = [await freePort(), await freePort()];
      const make = (label: string, port: number, localId: number) =>
        s.server(
          label,
          port,
          serverConfig(
            name,
            segmentOn(db.url),
            snowflakeOn(registry, place(s, registry, db, localId)),
            redisOn(redisUrl, name),
          ),
        );
      const a = make("A", portA, 1);
      const b = make("B", portB, 2);
      await s.startAll(a, b);
      const spaces = {
        segment: `segment:${name}`,
        snowflake: `snowflake:${name}`,
        redis: `redisSequence:${name}`,
      };
      s.segmentSpace(spaces.segment, db, name);
      s.snowflakeSpace(spaces.snowflake, [a, b]);
      s.redisSpace(spaces.redis, [1, 2]);
      s.startLoad([
        ...loopsOf(a, {
          segment: { tag: name, space: spaces.segment },
          snowflake: { space: spaces.snowflake },
          redis: { shard: 1, space: spaces.redis },
        }),
        ...loopsOf(b, {
          segment: { tag: name, space: spaces.segment },
          snowflake: { space: spaces.snowflake },
          redis: { shard: 2, space: spaces.redis },
        }),
      ]);
      await s.phase("steady", () => sleep(4000));
      const before = (await s.snowflakeState(a))?.workerId;
      await s.phase("A SIGKILLed, down 2 s", async () => {
        await a.kill();
        await sleep(2000);
      });
      const outcome = await s.phase("A restarting", () => a.tryStart());
      s.expect(outcome.started, `A started again after the SIGKILL (in ${seconds(outcome.ms)})`);
      const back = await s.phase("A serving again", async () => {
        const waits = await Promise.all(
          (["segment", "snowflake", "redisSequence"] as const).map((mode) =>
            s.waitForIds(a, 30_000, mode),
          ),
        );
        return waits.every((w) => w !== undefined) ? Math.max(...(waits as number[])) : undefined;
      });
      s.expect(
        back !== undefined,
        "A serves segment, snowflake and redis-sequence ids again after the restart",
      );
      await s.poll();
      const after = (await s.snowflakeState(a))?.workerId;
      if (FIXED_ID[registry]) {
        s.expect(
          after === before && after !== undefined,
          `A has the same worker id after the restart (${before} -> ${after})`,
        );
      } else {
        s.note(`A held worker id ${before} before the SIGKILL and ${after} after the restart`);
      }
      const down = s.phaseTotals("A SIGKILLed, down 2 s", isServer(a));
      s.expect(
        Object.keys(down.errors).length > 0 &&
          Object.keys(down.errors).every((c) => /^E[A-Z]+$/.test(c) && c !== "ETIMEDOUT"),
        `A's clients were refused at the connection while it was down (${codes(down.errors)})`,
      );
      for (const phase of ["A SIGKILLed, down 2 s", "A restarting"]) {
        const other = s.phaseTotals(phase, isServer(b));
        s.expect(
          Object.keys(other.errors).length === 0 && other.ids > 0,
          `B answered every request during "${phase}" (${other.ids} ids, errors: ${codes(other.errors)})`,
        );
      }
      await s.phase("steady after the restart", () => sleep(3000));
      return `A ready ${seconds(outcome.ms)} after the restart began, all modes serving ${seconds(back)} later; worker id ${before} -> ${after}; B unaffected`;
    },
  };
}

// ---- MariaDB ----------------------------------------------------------------------------------------

const mariadbKill: Scenario = {
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
  async run(s) {
    const name = s.unique("svc");
    const perLoop = s.rate / 4;
    const db = await s.ctx.services.segmentDatabase([
      { tag: name, step: stepLasting(perLoop, 15) },
    ]);
    s.onCleanup(() => db.close());
    const mysql = s.ctx.services.requireMysql();
    const a = s.server(
      "A",
      await freePort(),
      serverConfig(
        name,
        segmentOn(db.url, { dynamicStep: false }),
        snowflakeOn("mysql", { mysqlUrl: db.url }),
      ),
    );
    const b = s.server(
      "B",
      await freePort(),
      serverConfig(
        `${name}-lease`,
        segmentOn(db.url, { dynamicStep: false }),
        snowflakeOn("mysql-lease", { mysqlUrl: db.url }),
      ),
    );
    await s.startAll(a, b);
    const spaces = {
      segment: `segment:${name}`,
      fixed: `snowflake:${name}`,
      lease: `snowflake:${name}-lease`,
    };
    loadSharedTag(s, db, name, spaces.segment, [
      [a, spaces.fixed],
      [b, spaces.lease],
    ]);
    await s.phase("steady", () => sleep(3000));
    const maxAtKill = await db.maxId(name);
    await s.phase("MariaDB SIGKILLed, down 6 s", async () => {
      await mysql.kill();
      await sleep(6000);
    });
    await s.phase("MariaDB starting", () => mysql.start());
    const reloaded = await s.phase("segment ranges load again", async () => {
      const start = performance.now();
      while (performance.now() - start < 45_000) {
        const max = await db.maxId(name).catch(() => undefined);
        if (max !== undefined && max > maxAtKill) return { max, ms: performance.now() - start };
        await sleep(250);
      }
      return undefined;
    });
    s.expect(
      reloaded !== undefined,
      `segment ranges were taken again after MariaDB came back (max_id ${maxAtKill} -> ${reloaded?.max ?? "unchanged"})`,
    );
    for (const phase of ["MariaDB SIGKILLed, down 6 s", "MariaDB starting"]) {
      for (const server of [a, b]) {
        const t = s.phaseTotals(phase, isServer(server));
        s.expect(
          Object.keys(t.errors).length === 0 && t.ids > 0,
          `${server.label} answered every request during "${phase}" (${t.ids} ids, errors: ${codes(t.errors)})`,
        );
      }
    }
    await s.phase("steady after", () => sleep(2000));
    return `no failed request during the outage; ranges loaded again ${seconds(reloaded?.ms)} after MariaDB answered`;
  },
};

const mariadbPause: Scenario = {
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
  async run(s) {
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
    await s.phase("steady", () => sleep(3000));
    await s.phase("MariaDB paused 8 s", async () => {
      mysql.pause();
      try {
        await sleep(8000);
      } finally {
        mysql.resume();
      }
    });
    const back = await s.phase("MariaDB resumed: recovery", async () => {
      const waits = await Promise.all([s.waitForIds(a, 30_000), s.waitForIds(b, 30_000)]);
      return waits.every((w) => w !== undefined) ? Math.max(...(waits as number[])) : undefined;
    });
    const paused = s.phaseTotals("MariaDB paused 8 s", () => true);
    const exhausted = countCode(paused.errors, "SEGMENTS_EXHAUSTED");
    s.expect(
      exhausted > 0,
      `requests failed with SEGMENTS_EXHAUSTED (-3) once the buffer was used up (${exhausted} times)`,
    );
    s.expect(
      onlyCode(paused.errors, "SEGMENTS_EXHAUSTED"),
      `no other failure during the pause (${codes(paused.errors)}): no hang past exhaustedWaitMs, no 500`,
    );
    s.expect(
      back !== undefined,
      `both servers issue ids again after MariaDB resumed (within ${seconds(back)})`,
    );
    await s.phase("steady after", () => sleep(2000));
    return `-3 x${exhausted} while paused; ids again ${seconds(back)} after resume`;
  },
};

const mariadbPausePastLease: Scenario = {
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
  async run(s) {
    const name = s.unique("svc");
    const perLoop = s.rate / 4;
    const db = await s.ctx.services.segmentDatabase([{ tag: name, step: stepLasting(perLoop, 5) }]);
    s.onCleanup(() => db.close());
    const mysql = s.ctx.services.requireMysql();
    const a = s.server(
      "A",
      await freePort(),
      serverConfig(
        `${name}-lease`,
        segmentOn(db.url, { dynamicStep: false }),
        snowflakeOn("mysql-lease", { mysqlUrl: db.url }),
      ),
    );
    const b = s.server(
      "B",
      await freePort(),
      serverConfig(
        name,
        segmentOn(db.url, { dynamicStep: false }),
        snowflakeOn("mysql", { mysqlUrl: db.url }),
      ),
    );
    await s.startAll(a, b);
    const spaces = {
      segment: `segment:${name}`,
      lease: `snowflake:${name}-lease`,
      fixed: `snowflake:${name}`,
    };
    loadSharedTag(s, db, name, spaces.segment, [
      [a, spaces.lease],
      [b, spaces.fixed],
    ]);
    await s.phase("steady", () => sleep(3000));
    const pausedAt = s.now();
    await s.phase("MariaDB paused 56 s", async () => {
      mysql.pause();
      try {
        await sleep(56_000);
      } finally {
        mysql.resume();
      }
    });
    const back = await s.phase("MariaDB resumed: recovery", async () => {
      const waits = await Promise.all([
        s.waitForIds(a, 60_000, "snowflake"),
        s.waitForIds(a, 60_000, "segment"),
        s.waitForIds(b, 60_000, "segment"),
      ]);
      return waits.every((w) => w !== undefined) ? Math.max(...(waits as number[])) : undefined;
    });
    const loops = s.load.counters();
    const leaseLoop = loops.find((c) => c.server === "A" && c.mode === "snowflake");
    const paused = s.phases.find((p) => p.name === "MariaDB paused 56 s")!;
    const leaseErrors = paused.loops.find((l) => l.label === leaseLoop?.label)?.errors ?? {};
    const lost = countCode(leaseErrors, "LEASE_LOST");
    s.expect(
      lost > 0,
      `the lease holder fenced itself during the pause (LEASE_LOST (-4) x${lost})`,
    );
    const fencedAt = s.changes.find(
      (c) => c.server === "A" && /snowflake fenced/.test(c.what) && c.atMs >= pausedAt,
    );
    s.note(
      `A's monitor showed the lease fenced ${fencedAt ? seconds(fencedAt.atMs - pausedAt) : "(not seen)"} after the pause began`,
    );
    const fixedLoop = loops.find((c) => c.server === "B" && c.mode === "snowflake");
    const fixedErrors = paused.loops.find((l) => l.label === fixedLoop?.label)?.errors ?? {};
    s.expect(
      Object.keys(fixedErrors).length === 0,
      `the fixed registry's server kept issuing snowflake ids (errors: ${codes(fixedErrors)})`,
    );
    const segmentErrors = s.phaseTotals("MariaDB paused 56 s", (l) =>
      l.includes(" segment:"),
    ).errors;
    s.expect(
      countCode(segmentErrors, "SEGMENTS_EXHAUSTED") > 0,
      `segment answered -3 once its ranges were used up (${codes(segmentErrors)})`,
    );
    s.expect(
      back !== undefined,
      `lease snowflake and segment on both servers issue ids again after the resume (within ${seconds(back)})`,
    );
    await s.phase("steady after", () => sleep(2000));
    return `lease fenced (-4 x${lost}) at ${fencedAt ? seconds(fencedAt.atMs - pausedAt) : "?"}; fixed registry unaffected; all back ${seconds(back)} after resume`;
  },
};

// ---- ZooKeeper --------------------------------------------------------------------------------------

function zookeeperFault(fault: "kill" | "pause", short: boolean): Scenario {
  const faultPhase = fault === "kill" ? "ZooKeeper SIGKILLed, down 8 s" : "ZooKeeper paused 10 s";
  return {
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
    async run(s) {
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
      await s.phase("steady", () => sleep(3000));
      const before = (await s.snowflakeState(b))?.workerId;
      const faultAt = s.now();
      await s.phase(faultPhase, async () => {
        if (fault === "kill") {
          await zookeeper.kill();
          await sleep(8000);
        } else {
          zookeeper.pause();
          try {
            await sleep(10_000);
          } finally {
            zookeeper.resume();
          }
        }
      });
      if (fault === "kill") await s.phase("ZooKeeper starting", () => zookeeper.start());
      const back = await s.phase("recovery", () => s.waitForIds(b, 60_000));
      await s.phase("steady after", () => sleep(3000));
      await s.poll();
      const after = (await s.snowflakeState(b))?.workerId;
      const normal = s.phaseTotals(faultPhase, isServer(a));
      s.expect(
        Object.keys(normal.errors).length === 0 && normal.ids > 0,
        `normal mode (A) kept issuing while ZooKeeper was ${fault === "kill" ? "down" : "paused"} (${normal.ids} ids, errors: ${codes(normal.errors)})`,
      );
      const recycle = s.phaseTotals(faultPhase, isServer(b));
      const lost = countCode(recycle.errors, "LEASE_LOST");
      s.expect(
        lost > 0,
        `recycle mode (B) fenced: ids refused with LEASE_LOST (-4) x${lost} (${codes(recycle.errors)})`,
      );
      const bErrors = s.load.reports().find((r) => r.server === "B")?.errors ?? {};
      const firstLost = Object.entries(bErrors)
        .filter(([key]) => key.split(" ")[1] === "LEASE_LOST")
        .map(([, tally]) => tally.firstAtMs)
        .sort((x, y) => x - y)[0];
      if (firstLost !== undefined)
        s.note(
          `B's first LEASE_LOST answer came ${seconds(firstLost - faultAt)} after the fault began`,
        );
      s.expect(
        onlyCode(recycle.errors, "LEASE_LOST"),
        `B failed only with LEASE_LOST while fenced (${codes(recycle.errors)})`,
      );
      s.expect(
        back !== undefined,
        `recycle mode (B) took a new lease and issues ids again (${seconds(back)} after ZooKeeper was back)`,
      );
      s.note(`B held worker id ${before} before and ${after} after`);
      return `normal kept issuing; recycle fenced (-4 x${lost}) ${firstLost !== undefined ? seconds(firstLost - faultAt) : "?"} in, re-leased ${seconds(back)} after ZooKeeper was back (worker ${before} -> ${after})`;
    },
  };
}

// ---- Redis ------------------------------------------------------------------------------------------

const redisKill: Scenario = {
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
  async run(s) {
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
    await s.phase("steady", () => sleep(3000));
    await s.phase("Redis SIGKILLed, down 3 s", async () => {
      await redis.kill();
      await sleep(3000);
    });
    await s.phase("Redis starting (empty)", () => redis.start());
    const back = await s.phase("recovery", async () => {
      const waits = await Promise.all([s.waitForIds(c, 30_000), s.waitForIds(d, 30_000)]);
      return waits.every((w) => w !== undefined) ? Math.max(...(waits as number[])) : undefined;
    });
    const down = s.phaseTotals("Redis SIGKILLed, down 3 s", () => true);
    s.expect(
      countCode(down.errors, "UNAVAILABLE") > 0,
      `requests failed with UNAVAILABLE while Redis was down (${codes(down.errors)})`,
    );
    s.expect(
      onlyCode(down.errors, "UNAVAILABLE"),
      `no other failure while Redis was down (${codes(down.errors)})`,
    );
    s.expect(
      back !== undefined,
      `both servers issue ids again after Redis restarted empty (within ${seconds(back)})`,
    );
    const fenced = s.changes.filter((ch) => /redis fenced/.test(ch.what)).map((ch) => ch.server);
    s.note(
      `servers whose monitor showed the redis sequence fenced after the restart: ${[...new Set(fenced)].join(", ") || "none seen (the fence may pass between polls)"}`,
    );
    await s.phase("steady after", () => sleep(2000));
    return `UNAVAILABLE while down; ids again ${seconds(back)} after the empty Redis answered`;
  },
};

// ---- clocks -----------------------------------------------------------------------------------------

/** Which start-up check refused a start, read from the process's last words. */
function refusalOf(outcome: StartOutcome): {
  refused: boolean;
  check: string | undefined;
  text: string;
} {
  if (outcome.started) return { refused: false, check: undefined, text: "it STARTED" };
  const line = /refusing to start[^\n]*/.exec(outcome.output)?.[0];
  const check =
    line === undefined
      ? undefined
      : /behind the last timestamp/.test(line)
        ? "stored timestamp"
        : /live peer/.test(line)
          ? "peer clocks"
          : "other";
  const shown = line ?? outcome.output.trim().split("\n").slice(-2).join(" ");
  return {
    refused: outcome.code === 1 && line !== undefined,
    check,
    text: `exit code ${outcome.code}, "${shown.slice(0, 260)}${shown.length > 260 ? "..." : ""}"`,
  };
}

type ClockStep = "3ms" | "2s" | "1h" | "restart-behind";

function clockBack(steps: ClockStep[], short: boolean): Scenario {
  return {
    name: "clock-back",
    kind: "clock",
    title:
      `The wall clock of one of two snowflake servers (zk registry) moved back (${steps.filter((x) => x !== "restart-behind").join(", ")}), ` +
      "then the server SIGKILLed and restarted with its clock 1 h behind its last reported timestamp",
    documented:
      "Back by at most clockToleranceMs (5 ms): waited out, no error. Further back: ids refused with CLOCK_MOVED_BACKWARDS " +
      "(503, Leaf code -3) until the clock passes the last issued timestamp (2 s: by itself; 1 h: until the clock is fixed); " +
      "a restart with the clock behind the stored timestamp is refused (CLOCK_BEHIND_LEASE, exit code 1); the other server is unaffected; no id repeated.",
    needs: { zookeeper: true, faketime: true },
    plannedSeconds:
      10 +
      (steps.includes("3ms") ? 3 : 0) +
      (steps.includes("2s") ? 6 : 0) +
      (steps.includes("1h") ? 7 : 0) +
      25,
    short,
    async run(s) {
      const zookeeper = s.ctx.services.requireZookeeper();
      const name = s.unique("sf");
      const clock = s.fakeClock();
      const config = serverConfig(
        name,
        segmentOff(),
        snowflakeOn("zk", { zookeeper: zookeeper.url }),
      );
      const a = s.server("A", await freePort(), config, clock);
      const b = s.server("B", await freePort(), config);
      await s.startAll(a, b);
      const space = `snowflake:${name}`;
      s.snowflakeSpace(space, [a, b]);
      s.startLoad([
        ...loopsOf(a, { snowflake: { space } }),
        ...loopsOf(b, { snowflake: { space } }),
      ]);
      await s.phase("steady", () => sleep(4500));
      const workerBefore = (await s.snowflakeState(a))?.workerId;
      const summary: string[] = [];
      const onlyA = isServer(a);
      const checkB = (phase: string) => {
        const t = s.phaseTotals(phase, isServer(b));
        s.expect(
          Object.keys(t.errors).length === 0 && t.ids > 0,
          `B (real clock) answered every request during "${phase}" (${codes(t.errors)})`,
        );
      };

      if (steps.includes("3ms")) {
        const waitedBefore =
          (await s.metric(a, "leaf_snowflake_clock_rollbacks_total", 'action="waited"')) ?? 0;
        const burst = await s.phase("A's clock back 3 ms, ten times", () =>
          s.burst(a, space, async () => {
            // Ten steps back of 3 ms each (offset -3, -6, ... -30 ms), 300 ms apart, while ids
            // are asked for back to back: each step lands within 3 ms of an issued id.
            for (let step = 1; step <= 10; step++) {
              await sleep(300);
              clock.set(-3 * step);
            }
            await sleep(300);
          }),
        );
        const t = s.phaseTotals("A's clock back 3 ms, ten times", onlyA);
        const errors = { ...t.errors };
        for (const [code, n] of Object.entries(burst.errors))
          errors[code] = (errors[code] ?? 0) + n;
        const waited =
          ((await s.metric(a, "leaf_snowflake_clock_rollbacks_total", 'action="waited"')) ?? 0) -
          waitedBefore;
        s.expect(
          Object.keys(errors).length === 0 && t.ids + burst.ids > 0,
          `3 ms back is waited out: A answered every request (${t.ids + burst.ids} ids, errors: ${codes(errors)})`,
        );
        s.expect(
          waited > 0,
          `A saw the clock go back and waited it out (${waited} of 10 steps seen; the rest fell between ids)`,
        );
        clock.set(0);
        checkB("A's clock back 3 ms, ten times");
        summary.push(`3 ms (x10): no error, ${waited} waited out`);
      }

      if (steps.includes("2s")) {
        await s.phase("A's clock back 2 s", async () => {
          clock.set(-2000);
          // The process sees the offset within 1 s; then 2 s of refusal.
          await sleep(3800);
        });
        await s.phase("A still 2 s behind", () => sleep(2500));
        const refused = s.phaseTotals("A's clock back 2 s", onlyA);
        const n = countCode(refused.errors, "CLOCK_MOVED_BACKWARDS");
        s.expect(
          n > 0,
          `2 s back: A refused ids with CLOCK_MOVED_BACKWARDS (-3) x${n} (${codes(refused.errors)})`,
        );
        s.expect(
          onlyCode(refused.errors, "CLOCK_MOVED_BACKWARDS"),
          `2 s back: no other failure (${codes(refused.errors)})`,
        );
        const later = s.phaseTotals("A still 2 s behind", onlyA);
        s.expect(
          Object.keys(later.errors).length === 0 && later.ids > 0,
          `2 s back: once its clock passed the last issued timestamp A issued ids again by itself, clock still 2 s behind (${later.ids} ids, errors: ${codes(later.errors)})`,
        );
        checkB("A's clock back 2 s");
        summary.push(`2 s: -3 x${n}, then ids again`);
      }

      if (steps.includes("1h")) {
        await s.phase("A's clock back 1 h: taking effect", async () => {
          clock.set(-3_600_000);
          await sleep(1500);
        });
        await s.phase("A's clock back 1 h", () => sleep(3000));
        const held = s.phaseTotals("A's clock back 1 h", onlyA);
        const n = countCode(held.errors, "CLOCK_MOVED_BACKWARDS");
        s.expect(
          held.ids === 0 && n > 0,
          `1 h back: A issued no id and refused with CLOCK_MOVED_BACKWARDS (-3) x${n} (${codes(held.errors)})`,
        );
        const back = await s.phase("A's clock fixed", async () => {
          clock.set(0);
          return s.waitForIds(a, 10_000);
        });
        s.expect(
          back !== undefined,
          `1 h back: A issues ids again once its clock is fixed (after ${seconds(back)})`,
        );
        checkB("A's clock back 1 h");
        summary.push(`1 h: refused until fixed (-3 x${n})`);
      }

      if (steps.includes("restart-behind")) {
        const withPeer = await s.phase("A SIGKILLed, restarted 1 h behind (B live)", async () => {
          await a.kill();
          clock.set(-3_600_000);
          return a.tryStart();
        });
        const first = refusalOf(withPeer);
        s.expect(
          first.refused && first.check === "peer clocks",
          `with a live peer, A refused to start 1 h behind (peer clock check, CLOCK_SKEW): ${first.text}`,
        );
        checkB("A SIGKILLed, restarted 1 h behind (B live)");
        await s.phase("B stopped (SIGTERM): no live peer left", () => b.stop());
        const alone = await s.phase("A restarted 1 h behind (no peer)", () => a.tryStart());
        const second = refusalOf(alone);
        s.expect(
          second.refused && second.check === "stored timestamp",
          `alone, A refused to start 1 h behind its last reported timestamp (CLOCK_BEHIND_LEASE): ${second.text}`,
        );
        const restarted = await s.phase("A and B restarted with the right clock", async () => {
          clock.set(0);
          const outcomes = [await a.tryStart(), await b.tryStart()];
          const waits = await Promise.all([s.waitForIds(a, 20_000), s.waitForIds(b, 20_000)]);
          return { outcomes, serving: waits.every((w) => w !== undefined) };
        });
        await s.poll();
        const workerAfter = (await s.snowflakeState(a))?.workerId;
        const failedStarts = restarted.outcomes
          .map((o, i) => (o.started ? "" : `${i === 0 ? "A" : "B"}: ${refusalOf(o).text}`))
          .filter(Boolean);
        s.expect(
          failedStarts.length === 0 && restarted.serving && workerAfter === workerBefore,
          `with the clock fixed A (then B) start again and issue ids, A with the same worker id (${workerBefore} -> ${workerAfter})${failedStarts.length ? `; ${failedStarts.join("; ")}` : ""}`,
        );
        summary.push(
          `restart 1 h behind: refused by the ${first.check ?? "?"} check, then (alone) by the ${second.check ?? "?"} check`,
        );
      }
      await s.phase("steady after", () => sleep(2000));
      return summary.join("; ");
    },
  };
}

const clockBackup: Scenario = {
  name: "clock-back-backup",
  kind: "clock",
  title:
    "The wall clock of a snowflake server holding one backup worker id (zk registry) moved back 2 s",
  documented:
    "With backup worker ids (snowflake.backups), a rollback past the tolerance switches to a backup id whose last timestamp " +
    "is behind the clock, so no request fails (ids under the backup id are older, so not above the last id); no id repeated.",
  needs: { zookeeper: true, faketime: true },
  plannedSeconds: 16,
  short: false,
  async run(s) {
    const zookeeper = s.ctx.services.requireZookeeper();
    const name = s.unique("sf");
    const clock = s.fakeClock();
    const a = s.server(
      "A",
      await freePort(),
      serverConfig(
        name,
        segmentOff(),
        snowflakeOn("zk", { zookeeper: zookeeper.url }, { backups: 1 }),
      ),
      clock,
    );
    await s.startAll(a);
    const space = `snowflake:${name}`;
    s.snowflakeSpace(space, [a]);
    s.startLoad(loopsOf(a, { snowflake: { space, increasing: false } }));
    await s.phase("steady", () => sleep(3000));
    const state = await s.snowflakeState(a);
    const before =
      (await s.metric(a, "leaf_snowflake_clock_rollbacks_total", 'action="backup"')) ?? 0;
    await s.phase("A's clock back 2 s", async () => {
      clock.set(-2000);
      await sleep(4000);
    });
    const t = s.phaseTotals("A's clock back 2 s", () => true);
    s.expect(
      Object.keys(t.errors).length === 0 && t.ids > 0,
      `A answered every request while its clock went 2 s back (${t.ids} ids, errors: ${codes(t.errors)})`,
    );
    const switched =
      ((await s.metric(a, "leaf_snowflake_clock_rollbacks_total", 'action="backup"')) ?? 0) -
      before;
    s.expect(
      switched > 0,
      `A moved to its backup worker id (clock rollbacks handled by a backup: ${switched})`,
    );
    const after = await s.snowflakeState(a);
    s.note(
      `worker id ${state?.workerId}, backup ${state?.backups?.map((x) => x.workerId).join(", ")}; active after the rollback: ${after?.activeWorkerId}`,
    );
    await s.phase("steady after", () => sleep(2000));
    return `no failed request; ids moved to backup worker id ${after?.activeWorkerId}`;
  },
};

function clockRestartBehind(registry: "local" | "mysql"): Scenario {
  return {
    name: `clock-restart-behind:${registry}`,
    kind: "clock",
    title: `A snowflake server on the ${registry} registry SIGKILLed and restarted with its clock 1 h behind its last reported timestamp`,
    documented:
      "Start-up is refused with CLOCK_BEHIND_LEASE (both times in the message, exit code 1); with the clock fixed the same node starts " +
      "with the same worker id; no id repeated.",
    needs: { faketime: true, ...(registry === "mysql" ? { mysql: true } : {}) },
    plannedSeconds: 14,
    short: false,
    async run(s) {
      const name = s.unique("sf");
      const clock = s.fakeClock();
      let mysqlUrl: string | undefined;
      if (registry === "mysql") {
        const db = await s.ctx.services.segmentDatabase([]);
        s.onCleanup(() => db.close());
        mysqlUrl = db.url;
      }
      const a = s.server(
        "A",
        await freePort(),
        serverConfig(name, segmentOff(), snowflakeOn(registry, { mysqlUrl, localWorkerId: 5 })),
        clock,
      );
      await s.startAll(a);
      const space = `snowflake:${name}`;
      s.snowflakeSpace(space, [a]);
      s.startLoad(loopsOf(a, { snowflake: { space } }));
      // Reports go out 1 s after start, then every 3 s.
      await s.phase("steady", () => sleep(4500));
      const before = (await s.snowflakeState(a))?.workerId;
      const refused = await s.phase(
        "A SIGKILLed and restarted with its clock 1 h behind",
        async () => {
          await a.kill();
          clock.set(-3_600_000);
          return a.tryStart();
        },
      );
      const refusal = refusalOf(refused);
      s.expect(
        refusal.refused && refusal.check === "stored timestamp",
        `A refused to start 1 h behind its last reported timestamp (CLOCK_BEHIND_LEASE): ${refusal.text}`,
      );
      const back = await s.phase("A restarted with the right clock", async () => {
        clock.set(0);
        const outcome = await a.tryStart();
        return outcome.started ? s.waitForIds(a, 20_000) : undefined;
      });
      const after = (await s.snowflakeState(a))?.workerId;
      s.expect(
        back !== undefined && after === before,
        `with the clock fixed A starts and issues ids, same worker id (${before} -> ${after})`,
      );
      await s.phase("steady after", () => sleep(2000));
      return refused.started
        ? "STARTED with the clock behind"
        : `refused (exit ${refused.code}, ${refusal.check} check); restarted with worker ${after}`;
    },
  };
}

// ---- network ----------------------------------------------------------------------------------------

const slowNetwork: Scenario = {
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
  async run(s) {
    const mysql = s.ctx.services.requireMysql();
    const proxy = await SlowProxy.start(mysql.port);
    s.onCleanup(() => proxy.close());
    const name = s.unique("svc");
    const perLoop = s.rate / 4;
    const db = await s.ctx.services.segmentDatabase([{ tag: name, step: stepLasting(perLoop, 6) }]);
    s.onCleanup(() => db.close());
    const viaProxy = db.urlVia(proxy.port);
    const config = (localName: string) =>
      serverConfig(
        localName,
        segmentOn(viaProxy, { dynamicStep: false }),
        snowflakeOn("mysql", { mysqlUrl: viaProxy }),
      );
    const a = s.server("A", await freePort(), config(name));
    const b = s.server("B", await freePort(), config(name));
    await s.startAll(a, b);
    const spaces = { segment: `segment:${name}`, snowflake: `snowflake:${name}` };
    s.segmentSpace(spaces.segment, db, name);
    s.snowflakeSpace(spaces.snowflake, [a, b]);
    s.startLoad([
      ...loopsOf(a, {
        segment: { tag: name, space: spaces.segment },
        snowflake: { space: spaces.snowflake },
      }),
      ...loopsOf(b, {
        segment: { tag: name, space: spaces.segment },
        snowflake: { space: spaces.snowflake },
      }),
    ]);
    await s.phase("steady", () => sleep(3000));
    const maxBefore = await db.maxId(name);
    const chunksBefore = proxy.delayedChunks;
    await s.phase("200 ms per chunk to and from MariaDB", async () => {
      proxy.setDelay(200);
      try {
        await sleep(10_000);
      } finally {
        proxy.setDelay(0);
      }
    });
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
    const slow = s.phaseTotals("200 ms per chunk to and from MariaDB", () => true);
    s.expect(
      Object.keys(slow.errors).length === 0 && slow.ids > 0,
      `no request failed while the network was slow (${slow.ids} ids, errors: ${codes(slow.errors)})`,
    );
    await s.phase("steady after", () => sleep(2000));
    return `no failed request; ${chunks} chunks delayed; ranges loaded over the slow link`;
  },
};

/** Every scenario, in run order. The short form runs those marked `short`: one of each kind. */
export const SCENARIOS: readonly Scenario[] = [
  sigkillRestart("zk", true),
  sigkillRestart("zk-recycle", false),
  sigkillRestart("mysql", false),
  sigkillRestart("mysql-lease", false),
  sigkillRestart("local", false),
  mariadbKill,
  mariadbPause,
  mariadbPausePastLease,
  zookeeperFault("kill", false),
  zookeeperFault("pause", true),
  redisKill,
  clockBack(["3ms", "2s", "1h", "restart-behind"], true),
  clockBackup,
  clockRestartBehind("local"),
  clockRestartBehind("mysql"),
  slowNetwork,
];

/** The scenarios of a form. */
export function scenariosOf(form: "short" | "full"): Scenario[] {
  return SCENARIOS.filter((x) => form === "full" || x.short);
}
