// The PostgreSQL segment store under faults: PostgreSQL killed under load, a failover to a
// streaming replica that missed writes, and a split brain (the old primary writable again beside
// the promoted replica). Each scenario runs its own PostgreSQL (the test kit's; a primary and a
// pg_basebackup replica for the failovers), and every id of the tag is counted in one space.
import {
  freePort,
  type PostgresHandle,
  type PostgresReplicaPair,
  startPostgres,
  startPostgresReplicaPair,
} from "@leaf/testkit";
import { highWaterOf } from "./high-water";
import type { LeafProcess, StartOutcome } from "./leaf-process";
import { NO_ANSWER } from "./nemesis/faults/fault";
import {
  type PostgresDatabase,
  postgresDatabase,
  segmentOnPostgres,
  snowflakeOnPostgres,
} from "./postgres-kit";
import {
  allServing,
  codes,
  countCode,
  expectServed,
  isServer,
  lastWords,
  loopsOf,
  loopsOfServer,
  messagesOf,
  type Scenario,
  seconds,
  stepLasting,
  until,
} from "./scenario-kit";
import { type ScenarioRun, sleep } from "./scenario-run";
import { outage, refused, served } from "./scenarios-stores";
import { adminOn, serverConfig, snowflakeOff } from "./server-configs";

/** Codes a segment server may answer while its store gives no range (README: failure table). */
const NO_RANGE = ["SEGMENTS_EXHAUSTED", "NOT_INITIALIZED"];

/** The code of an error key: "503 CORRUPT_DATA" and "ECONNREFUSED" (no answer) alike. */
const codeOf = (key: string) => (/^\d{3} /.test(key) ? (key.split(" ")[1] ?? "") : key);

/** Failures in `errors` whose code is not one of `allowed`. */
function others(errors: Record<string, number>, allowed: string[]): Record<string, number> {
  return Object.fromEntries(
    Object.entries(errors).filter(([key]) => !allowed.includes(codeOf(key))),
  );
}

/** A private PostgreSQL for one scenario, removed when it ends. */
async function ownPostgres(s: ScenarioRun): Promise<PostgresHandle> {
  const pg = await startPostgres({ useEnv: false });
  s.onCleanup(() => pg.dispose());
  return pg;
}

/** A primary and its streaming replica with a database of `tag`; the servers list both hosts. */
async function replicated(s: ScenarioRun, tag: string, step: number) {
  const pair = await startPostgresReplicaPair();
  s.onCleanup(() => pair.dispose());
  const db = await postgresDatabase(pair.primary, [{ tag, step }], pair.replica);
  s.onCleanup(() => db.close());
  await pair.waitForReplica();
  return { pair, db };
}

// ---- PostgreSQL killed under load
// -------------------------------------------------------------------

const LONG_LEASE_MS = 20_000;
const SHORT_LEASE_MS = 3000;

export const postgresKill = outage({
  name: "postgres-kill",
  kind: "PostgreSQL",
  title:
    "PostgreSQL SIGKILLed for 6 s and restarted, under segment load (ranges sized to outlast it) and snowflake on the postgres registry (A: 20 s lease, B: 3 s lease)",
  documented:
    "Segment ids keep coming from the loaded ranges and range loads succeed again once PostgreSQL is back; the postgres " +
    "registry's holder keeps issuing while its lease lives (A: fences only 16 s after its last renewal) and fences with " +
    "LEASE_LOST (-4), nothing else, leaseMs - leaseMs / 5 after it (B: 2.4 s), then leases again; no id repeated.",
  needs: {},
  plannedSeconds: 40,
  short: false,
  async plan(s) {
    const pg = await ownPostgres(s);
    const name = s.unique("svc");
    const db = await postgresDatabase(pg, [{ tag: name, step: stepLasting(s.rate / 4, 15) }]);
    s.onCleanup(() => db.close());
    const make = async (label: string, leaseMs: number) =>
      s.server(
        label,
        await freePort(),
        serverConfig(name, segmentOnPostgres(db.url), snowflakeOnPostgres(db.url, { leaseMs })),
      );
    const a = await make("A", LONG_LEASE_MS);
    const b = await make("B", SHORT_LEASE_MS);
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
    const down = "PostgreSQL SIGKILLed, down 6 s";
    let maxAtKill = 0n;
    let reloadedTo: bigint | undefined;
    const snowflakeOf = (server: LeafProcess) => (label: string) =>
      label.startsWith(`${server.label} snowflake:`);
    return {
      fault: [
        {
          phase: down,
          async run() {
            maxAtKill = await db.maxId(name);
            await pg.kill();
            await sleep(6000);
          },
        },
        { phase: "PostgreSQL starting", run: () => pg.start() },
      ],
      recovery: {
        phase: "ranges and B's lease again",
        text: "segment ranges were taken again and B leased a worker id again after PostgreSQL came back",
        async wait() {
          const start = performance.now();
          const ranges = await until(async () => {
            const max = await db.maxId(name).catch(() => undefined);
            if (max !== undefined && max > maxAtKill) reloadedTo = max;
            return reloadedTo !== undefined;
          }, 45_000);
          const leased = await s.waitForIds(b, 45_000, "snowflake", 100);
          return ranges === undefined || leased === undefined
            ? undefined
            : performance.now() - start;
        },
      },
      answered: [
        served(down, isServer(a), "A (segment, and snowflake on a 20 s lease)"),
        served(down, (l) => l.startsWith("B segment:"), "B's segment loops"),
        refused(down, snowflakeOf(b), "B (snowflake on a 3 s lease) fenced:", "LEASE_LOST", true),
      ],
      async after(back) {
        const lost = countCode(s.phaseTotals(down, snowflakeOf(b)).errors, "LEASE_LOST");
        s.note(`max_id ${maxAtKill} at the kill, ${reloadedTo ?? "unchanged"} after the restart`);
        return `A and the segment loops answered every request; B fenced (-4 x${lost}) and leased again; all back ${seconds(back)} after PostgreSQL answered`;
      },
    };
  },
});

// ---- a failover to a replica that missed writes
// ---------------------------------------------------

export const postgresFailover: Scenario = {
  name: "postgres-failover",
  kind: "PostgreSQL",
  title:
    "A PostgreSQL primary and its streaming replica (asynchronous), two servers with the host list [primary, replica]: replication stopped while both take ranges, the primary SIGKILLed, the replica promoted (its max_id behind their ranges), B restarted (its data folder kept), then the operator's fix",
  documented:
    "A running node refuses a promoted replica whose max_id is behind the ranges it took (CORRUPT_DATA `stale-primary`, " +
    "from the store's floor), and a restarted node refuses it by the high-water mark kept in its data folder (CORRUPT_DATA); " +
    "nothing is written to it and no id is served twice; once max_id is raised past the highest mark (the admin API lists " +
    "them), both serve again.",
  needs: {},
  plannedSeconds: 45,
  short: false,
  async run(s) {
    const name = s.unique("failover");
    const { pair, db } = await replicated(s, name, stepLasting(s.rate / 2, 1));
    const config = serverConfig(
      name,
      segmentOnPostgres(db.url, { refreshIntervalMs: 2000 }),
      snowflakeOff(),
      adminOn(),
    );
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
    const stale = "replication stopped: ranges the replica misses";
    const frozen = await s.phase(stale, async () => {
      await pair.pauseReplication();
      const frozenAt = await replicaMaxId(pair, db, name);
      // Until both servers hold a range the replica does not know, and a little more.
      await until(async () => {
        const marks = await Promise.all([a, b].map((x) => highWaterOf(x, name)));
        return marks.every((m) => m !== undefined && m > frozenAt);
      }, 20_000);
      await sleep(2000);
      return frozenAt;
    });
    const marksBefore = await Promise.all([a, b].map((x) => highWaterOf(x, name)));
    s.note(
      `the replica keeps max_id ${frozen}; the servers' marks are ${marksBefore.join(", ")} (the primary's max_id ${await db.maxId(name)})`,
    );
    const promoted = "primary SIGKILLed, the replica promoted";
    await s.phase(promoted, async () => {
      await pair.primary.kill();
      await pair.promoteReplica();
      db.readFrom(pair.replica);
      await sleep(4000);
    });
    for (const server of [a, b]) {
      const t = s.phaseTotals(promoted, isServer(server));
      const told = messagesOf(s, server).find((m) => /stale primary|stale-primary/.test(m));
      s.expect(
        countCode(t.errors, "CORRUPT_DATA") > 0 &&
          Object.keys(others(t.errors, ["CORRUPT_DATA", ...NO_RANGE])).length === 0,
        `${server.label} refused the promoted replica with CORRUPT_DATA naming the stale primary, no other code but ${NO_RANGE.join(", ")} (${codes(t.errors)}): ${told ?? "(no such message)"}`,
      );
    }
    const restarted = "B restarted (SIGTERM, start; its data folder kept)";
    const bStart = await s.phase(restarted, async () => {
      await b.stop();
      // A node whose tag is refused may or may not become ready: it serves nothing either way.
      const outcome = await b.tryStart();
      await sleep(4000);
      return outcome;
    });
    const bAfterRestart = s.load.idRange(loopsOfServer(b), b.incarnation);
    const restartErrors = s.phaseTotals(restarted, isServer(b)).errors;
    s.expect(
      bStart.started &&
        bAfterRestart.ids === 0 &&
        countCode(restartErrors, "CORRUPT_DATA") > 0 &&
        Object.keys(
          others(restartErrors, ["CORRUPT_DATA", ...NO_RANGE, ...NO_ANSWER, "SHUTTING_DOWN"]),
        ).length === 0,
      `B, restarted on the stale replica, refused the tag by its high-water mark: ${bAfterRestart.ids} ids from its restart (${bStart.started ? "ready" : `not ready: ${lastWords(bStart.output)}`}; ${codes(restartErrors)})`,
    );
    s.note(
      `B's refusals: ${messagesOf(s, b)
        .filter((m) => /CORRUPT_DATA/.test(m))
        .join(" | ")}`,
    );
    const fix = "operator: max_id raised past the highest mark";
    const back = await s.phase(fix, async () => {
      let highest = 0n;
      for (const server of [a, b]) {
        const mark = await highWaterOf(server, name);
        if (mark !== undefined && mark > highest) highest = mark;
      }
      await pair.query(
        pair.replica,
        "UPDATE leaf_alloc SET max_id = GREATEST(max_id, $1::bigint) WHERE biz_tag = $2",
        [highest.toString(), name],
        db.database,
      );
      s.note(`max_id raised to at least ${highest}, the highest mark the servers list`);
      if (!b.running) await b.start();
      return allServing(s, [a, b], 60_000);
    });
    s.expect(back !== undefined, `both servers serve again after the fix (${seconds(back)})`);
    await s.phase("steady after", () => sleep(2000));
    expectServed(s, "steady after", () => true, "every server");
    const refusedAt = s.phaseTotals(promoted, () => true);
    return `replica frozen at ${frozen}; A and B refused it (${codes(refusedAt.errors)}), B again after its restart; serving ${seconds(back)} after the fix`;
  },
};

/** The tag's max_id on the replica of `pair` (a standby answers reads), straight from its table. */
async function replicaMaxId(
  pair: PostgresReplicaPair,
  db: PostgresDatabase,
  tag: string,
): Promise<bigint> {
  const rows = await pair.query(
    pair.replica,
    "SELECT max_id::text AS max_id FROM leaf_alloc WHERE biz_tag = $1",
    [tag],
    db.database,
  );
  if (!rows[0]) throw new Error(`[leaf] [chaos] tag ${tag} is missing on the replica`);
  return BigInt(String(rows[0].max_id));
}

// ---- a split brain: the old primary writable again beside the promoted replica
// ---------------------

/** The store's refusal (not the tag's name, which holds "split.brain" too). */
const SPLIT_BRAIN = /split brain: \d+ listed PostgreSQL hosts are writable/;

export const postgresSplitBrain: Scenario = {
  name: "postgres-split-brain",
  kind: "PostgreSQL",
  title:
    "A PostgreSQL primary and its streaming replica (synchronous), two servers with the host list [primary, replica]: the primary SIGKILLed, the replica promoted, the old primary restarted writable beside it, a third server started once both refuse, then the old primary made read-only",
  documented:
    "While the primary is down the standby is refused (it takes no writes); once promoted, ranges come from it. With both " +
    "listed hosts writable (a split brain) every range is refused: requests fail with 503 once the loaded ranges are used " +
    "up, the message naming the split brain, and a server started then (it begins with the old primary, whose max_id is " +
    "behind; readiness waits for no tag) issues nothing; once the old primary is made read-only ranges resume; no id repeated.",
  needs: {},
  plannedSeconds: 40,
  short: false,
  async run(s) {
    const name = s.unique("split");
    const { pair, db } = await replicated(s, name, stepLasting(s.rate / 2, 1));
    const { primary, replica } = pair;
    // Synchronous: the promoted replica has every range answered (a commit waits for it).
    await pair.query(primary, "ALTER SYSTEM SET synchronous_standby_names = '*'");
    await pair.query(primary, "SELECT pg_reload_conf()");
    const config = serverConfig(name, segmentOnPostgres(db.url), snowflakeOff());
    const a = s.server("A", await freePort(), config);
    const b = s.server("B", await freePort(), config);
    // C starts during the split brain: a fresh process begins with the first listed host.
    const c = s.server("C", await freePort(), config);
    await s.startAll(a, b);
    const space = `segment:${name}`;
    s.segmentSpace(space, db, name);
    s.startLoad([
      ...loopsOf(a, { segment: { tag: name, space } }),
      ...loopsOf(b, { segment: { tag: name, space } }),
    ]);
    await s.phase("steady", () => sleep(3000));
    await s.phase("primary SIGKILLed", async () => {
      await primary.kill();
      await sleep(4000);
    });
    const failover = await s.phase("replica promoted", async () => {
      await pair.promoteReplica();
      db.readFrom(replica);
      return allServing(s, [a, b], 60_000);
    });
    s.expect(
      failover !== undefined,
      `both servers take ranges from the promoted replica (${seconds(failover)})`,
    );
    const splitBrain = "old primary back, writable: split brain";
    let cStart: StartOutcome | undefined;
    const refusedAfter = await s.phase(splitBrain, async () => {
      await primary.start();
      // It comes back alone: its commits must not wait for a standby that is gone.
      await pair.query(primary, "ALTER SYSTEM RESET synchronous_standby_names");
      await pair.query(primary, "SELECT pg_reload_conf()");
      // Until both servers failed (once their loaded ranges were used up), naming the split brain.
      const failed = (x: LeafProcess) =>
        s.load
          .counters()
          .filter(loopsOfServer(x))
          .reduce((n, c) => n + Object.values(c.errors).reduce((m, k) => m + k, 0), 0);
      const before = [a, b].map(failed);
      const ms = await until(
        () =>
          [a, b].every(
            (x, i) => failed(x) > before[i]! && messagesOf(s, x).some((m) => SPLIT_BRAIN.test(m)),
          ),
        20_000,
      );
      // Readiness waits for no tag: C starts, and its first range is refused.
      cStart = await c.tryStart();
      if (cStart.started) s.addLoad(loopsOf(c, { segment: { tag: name, space } }));
      await sleep(4000);
      return ms;
    });
    s.expect(
      refusedAfter !== undefined,
      `A and B refused ranges as a split brain once their loaded ranges were used up (${seconds(refusedAfter)} after the old primary answered)`,
    );
    for (const server of [a, b, c]) {
      const t = s.phaseTotals(splitBrain, isServer(server));
      const not503 = Object.keys(t.errors).filter((key) => !key.startsWith("503 "));
      const told = messagesOf(s, server).find((m) => SPLIT_BRAIN.test(m));
      s.expect(
        told !== undefined && not503.length === 0,
        `${server.label} refused with 503 naming the split brain, nothing else (${codes(t.errors)}): ${told ?? "(no such message)"}`,
      );
    }
    const fromC = s.phaseTotals(splitBrain, isServer(c));
    s.expect(
      cStart?.started === true && fromC.ids === 0,
      `C, started during the split brain (it begins with the old primary, whose max_id is behind), issued no id (${fromC.ids} ids; ${cStart?.started ? "started" : lastWords(cStart?.output ?? "")})`,
    );
    const healed = await s.phase("old primary made read-only (operator)", async () => {
      await pair.query(primary, "ALTER SYSTEM SET default_transaction_read_only = on");
      await pair.query(primary, "SELECT pg_reload_conf()");
      return allServing(s, [a, b, c], 60_000);
    });
    s.expect(
      healed !== undefined,
      `every server serves again once only one host is writable (${seconds(healed)})`,
    );
    await s.phase("steady after", () => sleep(2000));
    expectServed(s, "steady after", () => true, "every server");
    return `split brain refused ${seconds(refusedAfter)} after the old primary came back; serving ${seconds(healed)} after it was made read-only`;
  },
};
