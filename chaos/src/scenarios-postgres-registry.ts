// The PostgreSQL worker-id registry under faults: two servers that can only share one worker id
// (workerBits 0), the holder A and B, which asks for the id while A's lease is made to lapse:
// PostgreSQL SIGSTOPped past the lease, or a failover to a streaming replica that missed A's
// renewals. A's statements are held on its link (the test kit's TCP proxy) until B holds the id, so
// that a holder which did not fence would still be issuing when B begins. Both servers' ids share
// one space: any id issued twice is counted.
import { freePort, startPostgres, startPostgresReplicaPair, TcpProxy } from "@leaf/testkit";
import type { LeafProcess } from "./leaf-process";
import { postgresDatabase, segmentOnPostgres, snowflakeOnPostgres } from "./postgres-kit";
import {
  codes,
  countCode,
  expectRefused,
  expectServed,
  isServer,
  lastWords,
  loopsOf,
  onlyCode,
  type Scenario,
  seconds,
  stepLasting,
  until,
} from "./scenario-kit";
import { type ScenarioRun, sleep } from "./scenario-run";
import { expectFencedFirst, ONE_ID, startWhenFree } from "./scenarios-fencing";
import { segmentOff, serverConfig, snowflakeOff } from "./server-configs";

/** The registry's lease (the holder fences at leaseMs - leaseMs / 5 = 2.4 s after a renewal). */
const LEASE_MS = 3000;

/** A (through `proxy`) holds the only worker id; B (direct) is made, not started. */
async function holderAndTaker(s: ScenarioRun, name: string, proxiedUrl: string, directUrl: string) {
  const options = { leaseMs: LEASE_MS, workerBits: 0 };
  const a = s.server(
    "A",
    await freePort(),
    serverConfig(name, segmentOff(), snowflakeOnPostgres(proxiedUrl, options)),
  );
  const b = s.server(
    "B",
    await freePort(),
    serverConfig(name, segmentOff(), snowflakeOnPostgres(directUrl, options)),
  );
  return { a, b, space: `snowflake:${name}` };
}

/** B's start while A holds the id: refused (WORKER_IDS_EXHAUSTED). */
async function expectEarlyRefusal(s: ScenarioRun, b: LeafProcess): Promise<void> {
  const early = await s.phase("B starting while A holds the id", () => b.tryStart());
  s.expect(
    !early.started &&
      early.code === 1 &&
      /WORKER_IDS_EXHAUSTED|no free worker id/.test(early.output),
    `B's start was refused while A held the only worker id (${early.started ? "it STARTED" : `exit code ${early.code}: "${lastWords(early.output)}"`})`,
  );
}

/**
 * Waits for B's start (begun by the caller), then lets A's held statements through 500 ms later
 * (half a second of both issuing, had A not fenced) and puts B under load.
 */
async function takeover(
  s: ScenarioRun,
  b: LeafProcess,
  space: string,
  starting: ReturnType<typeof startWhenFree>,
  heldLink: TcpProxy,
) {
  const started = await starting;
  if (started.outcome.started) {
    s.addLoad(loopsOf(b, { snowflake: { space } }));
    await sleep(500);
  }
  heldLink.resume();
  if (started.outcome.started) await s.waitForIds(b, 20_000, "snowflake", 500);
  return started;
}

/** After the takeover: A's link works again, A issues nothing while B holds the id. */
async function afterTakeover(s: ScenarioRun, a: LeafProcess, b: LeafProcess): Promise<void> {
  const healed = "A's link back, B serving";
  await s.phase(healed, () => sleep(3000));
  const t = s.phaseTotals(healed, isServer(a));
  s.expect(
    t.ids === 0 && onlyCode(t.errors, "LEASE_LOST"),
    `A issued no id while B held the id, only LEASE_LOST (${t.ids} ids; ${codes(t.errors)})`,
  );
  expectServed(s, healed, isServer(b), "B");
  expectFencedFirst(s, a, b);
}

// ---- PostgreSQL paused past the lease
// -------------------------------------------------------------

export const postgresPausePastLease: Scenario = {
  name: "postgres-pause-past-lease",
  kind: "PostgreSQL",
  title:
    "PostgreSQL SIGSTOPped past the registry's 3 s lease: A holds the only worker id (workerBits 0) through a TCP proxy that holds its statements until B, asking from the start of the pause, holds the id; C and D on the segment store (ranges of about 0.5 s of load)",
  documented:
    "A fences leaseMs - leaseMs / 5 (2.4 s) after its last confirmed renewal, before the database can give its id away, " +
    "and answers LEASE_LOST (-4) only; B's starts fail while PostgreSQL is stopped and B is granted the id once it runs " +
    "again, starting after every id of A (its horizon); the segment servers answer SEGMENTS_EXHAUSTED (-3) only once " +
    "their ranges are used up, and serve again after SIGCONT; no id repeated.",
  needs: {},
  plannedSeconds: 40,
  short: false,
  async run(s) {
    const pg = await startPostgres({ useEnv: false });
    s.onCleanup(() => pg.dispose());
    const name = s.unique("pause");
    const tag = `${name}.seg`;
    const db = await postgresDatabase(pg, [{ tag, step: stepLasting(s.rate / 4, 0.5) }]);
    s.onCleanup(() => db.close());
    const proxy = await TcpProxy.start({ targetPort: pg.port });
    s.onCleanup(() => proxy.close());
    const { a, b, space } = await holderAndTaker(s, name, db.urlVia(proxy.port), db.url);
    const segmentConfig = serverConfig(`${name}.seg`, segmentOnPostgres(db.url), snowflakeOff());
    const c = s.server("C", await freePort(), segmentConfig);
    const d = s.server("D", await freePort(), segmentConfig);
    await s.startAll(a, c, d);
    const segmentSpace = `segment:${tag}`;
    s.snowflakeSpace(space, [a, b], ONE_ID);
    s.segmentSpace(segmentSpace, db, tag);
    s.startLoad([
      ...loopsOf(a, { snowflake: { space } }),
      ...[c, d].flatMap((x) => loopsOf(x, { segment: { tag, space: segmentSpace } })),
    ]);
    await s.phase("steady (A holds worker id 0)", () => sleep(3000));
    await expectEarlyRefusal(s, b);
    const paused = "PostgreSQL paused 4.5 s; A's link held until B holds the id";
    const started = await s.phase(paused, async () => {
      proxy.pause();
      pg.pause();
      let starting: ReturnType<typeof startWhenFree>;
      try {
        starting = startWhenFree(b, 60_000);
        await sleep(LEASE_MS + 1500);
      } finally {
        pg.resume();
      }
      return takeover(s, b, space, starting, proxy);
    });
    s.expect(
      started.outcome.started,
      `B was granted the id once PostgreSQL ran again (after ${started.refused} refused start(s): ${started.firstRefusal ?? "none"})`,
    );
    expectRefused(s, paused, isServer(a), "LEASE_LOST", "A, the holder,");
    const segmentLoops = (label: string) => label.includes(" segment:");
    expectRefused(s, paused, segmentLoops, "SEGMENTS_EXHAUSTED", "the segment servers");
    await afterTakeover(s, a, b);
    expectServed(s, "A's link back, B serving", segmentLoops, "the segment servers");
    const lost = countCode(s.phaseTotals(paused, isServer(a)).errors, "LEASE_LOST");
    return `A fenced (-4 x${lost}); B held the id after ${started.refused} refused start(s); segment -3 only while paused`;
  },
};

// ---- a failover to a replica that missed A's renewals
// ----------------------------------------------

export const postgresRegistryFailover: Scenario = {
  name: "postgres-registry-failover",
  kind: "PostgreSQL",
  title:
    "The postgres registry behind a virtual IP (a TCP proxy per server) on a primary with a streaming replica: A holds the only worker id; replication stopped (the replica misses A's renewals), the primary SIGKILLed, the proxies moved to the replica while it is a standby, the replica promoted once A fenced, B asking for the id meanwhile",
  documented:
    "A standby is refused before anything is written (pg_is_in_recovery()): B's starts fail and A's renewals fail, so A " +
    "fences (LEASE_LOST, -4, only) before its lease could end; promoted after that (the registry README: asynchronous " +
    "replication loses leases, so promote only once every holder stopped), the replica grants the id to B, which starts " +
    "after A's horizon; every id of A is below every id of B; no id repeated.",
  needs: {},
  plannedSeconds: 40,
  short: false,
  async run(s) {
    const pair = await startPostgresReplicaPair();
    s.onCleanup(() => pair.dispose());
    const { primary, replica } = pair;
    const db = await postgresDatabase(primary, []);
    s.onCleanup(() => db.close());
    await pair.waitForReplica();
    const vipA = await TcpProxy.start({ targetPort: primary.port });
    const vipB = await TcpProxy.start({ targetPort: primary.port });
    s.onCleanup(() => vipA.close());
    s.onCleanup(() => vipB.close());
    const name = s.unique("failover");
    const { a, b, space } = await holderAndTaker(
      s,
      name,
      db.urlVia(vipA.port),
      db.urlVia(vipB.port),
    );
    await s.startAll(a);
    s.snowflakeSpace(space, [a, b], ONE_ID);
    s.startLoad(loopsOf(a, { snowflake: { space } }));
    await s.phase("steady (A holds worker id 0)", () => sleep(3000));
    await expectEarlyRefusal(s, b);
    await s.phase("replication stopped: the replica misses A's renewals", async () => {
      await pair.pauseReplication();
      await sleep(LEASE_MS + 1000);
    });
    const toStandby = "primary SIGKILLed, the proxies moved to the standby";
    let starting: ReturnType<typeof startWhenFree> | undefined;
    let grantedAt = 0;
    const fenced = await s.phase(toStandby, async () => {
      await primary.kill();
      for (const vip of [vipA, vipB]) vip.retarget(replica.port);
      starting = startWhenFree(b, 90_000).then((x) => {
        grantedAt = s.now();
        return x;
      });
      const ms = await until(async () => (await s.snowflakeState(a))?.state !== "held", 15_000);
      await sleep(1000);
      return ms;
    });
    s.expect(
      fenced !== undefined,
      `A's monitor showed it fenced while its registry was a standby (${seconds(fenced)} after the kill)`,
    );
    const promoted = "replica promoted; A's link held until B holds the id";
    let promotedAt = 0;
    const started = await s.phase(promoted, async () => {
      vipA.pause();
      await pair.promoteReplica();
      promotedAt = s.now();
      return takeover(s, b, space, starting!, vipA);
    });
    s.expect(
      grantedAt >= promotedAt,
      `B was not granted the id before the promotion (started ${seconds(grantedAt - promotedAt)} after it)`,
    );
    s.expect(
      started.outcome.started,
      `B was granted the id by the promoted replica (after ${started.refused} refused start(s): ${started.firstRefusal ?? "none"})`,
    );
    s.expect(
      /standby|pg_is_in_recovery|takes no writes/.test(started.firstRefusal ?? ""),
      `B's first refusal named the standby: ${started.firstRefusal ?? "none"}`,
    );
    for (const phase of [toStandby, promoted]) {
      const t = s.phaseTotals(phase, isServer(a));
      s.expect(
        countCode(t.errors, "LEASE_LOST") > 0 && onlyCode(t.errors, "LEASE_LOST"),
        `A answered LEASE_LOST (-4) and nothing else during "${phase}" (${t.ids} ids; ${codes(t.errors)})`,
      );
    }
    await afterTakeover(s, a, b);
    return `A fenced ${seconds(fenced)} after the kill; B held the id after ${started.refused} refused start(s) on the standby and the promoted replica`;
  },
};
