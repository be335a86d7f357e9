// Failover of the PostgreSQL segment store across a real primary and streaming replica: the primary
// is SIGKILLed, the replica promoted (pg_promote), and the old primary comes back writable beside
// it (a split brain); or the replica stops replaying first and is promoted without the last writes
// (a stale primary). Generators stand for servers; every id they hand out is counted.
import { SegmentIdGenerator } from "@leaf/segment";
import {
  countRepeatedIds,
  IdLog,
  type PostgresReplicaPair,
  startPostgresReplicaPair,
} from "@leaf/testkit";
import { afterEach, describe, expect, it, vi } from "vitest";
import { PostgresSegmentStore } from "../src/index";

/** Retries `check` until it passes; generous, since these machines are shared (not a speed bound). */
const eventually = <T>(check: () => T | Promise<T>, timeout = 60_000) =>
  vi.waitFor(check, { timeout, interval: 50 });

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

let pair: PostgresReplicaPair | undefined;
const generators: SegmentIdGenerator[] = [];

afterEach(async () => {
  for (const g of generators.splice(0)) await g.close().catch(() => {});
  await pair?.dispose();
  pair = undefined;
});

/** One generator standing for one server process: its own store, pools and per-tag memory. */
interface Taker {
  generator: SegmentIdGenerator;
  store: PostgresSegmentStore;
  ids: IdLog;
  refusals: unknown[];
}

async function setUp(step: number) {
  pair = await startPostgresReplicaPair();
  const { primary, replica } = pair;
  const database = await primary.createDatabase("failover");
  const store = new PostgresSegmentStore({ url: primary.urlFor(database) });
  await store.createSchema();
  await store.createTag({ tag: "t", step, startId: 1n });
  await store.close();
  await pair.waitForReplica();
  const hosts = [primary, replica].map((s) => ({ host: s.host, port: s.port }));
  const taker = async (): Promise<Taker> => {
    const store = new PostgresSegmentStore({
      hosts,
      user: primary.user,
      database,
      connectTimeoutMs: 1_000,
      queryTimeoutMs: 2_000,
    });
    const t: Taker = { generator: undefined!, store, ids: new IdLog(), refusals: [] };
    t.generator = new SegmentIdGenerator({
      store,
      dynamicStep: false,
      exhaustedWaitMs: 200,
      refreshIntervalMs: 200,
      retry: { initialMs: 20, maxMs: 200 },
      onError: (error, context) => {
        if (context.refused) t.refusals.push(error);
      },
    });
    generators.push(t.generator);
    await t.generator.start();
    return t;
  };
  return { pair, database, taker };
}

/** Takes ids from every taker until stopped, as a busy server does; failures are waited out. */
function drive(takers: Taker[]) {
  let running = true;
  const loop = async (t: Taker) => {
    while (running) {
      try {
        for (const id of await t.generator.nextIds("t", 25)) t.ids.push(id);
      } catch {
        await sleep(10);
      }
      await new Promise((resolve) => setImmediate(resolve));
    }
  };
  const loops = takers.map(loop);
  return {
    add(t: Taker) {
      loops.push(loop(t));
    },
    async stop() {
      running = false;
      await Promise.all(loops);
    },
  };
}

function expectGrown(takers: Taker[], before: number[], n: number): void {
  for (const [i, t] of takers.entries()) expect(t.ids.count).toBeGreaterThan(before[i]! + n);
}

const counted = (takers: Taker[]) => countRepeatedIds(takers.map((t) => t.ids));

/** Prints every id counted, also when the test fails (its numbers are what a failure shows). */
function report(what: string, takers: Taker[]): void {
  const { total, duplicates } = counted(takers);
  console.log(`${what}: ${total} ids, ${duplicates} handed out twice`);
}
const total = (takers: Taker[]) => takers.reduce((n, t) => n + t.ids.count, 0);

describe("PostgresSegmentStore failover over a real primary and streaming replica", () => {
  it("serves no id twice through a primary kill, a promotion and the old primary back writable, and refuses the split brain", async () => {
    const { pair, taker } = await setUp(200);
    const { primary, replica } = pair;
    const takers = [await taker(), await taker()];
    const extra: Taker[] = [];
    const load = drive(takers);
    try {
      await eventually(() => expect(total(takers)).toBeGreaterThan(10_000));
      await pair.waitForReplica();
      // The primary dies; both generators run out of buffered ids and fail their loads.
      await primary.kill();
      await eventually(() => {
        for (const t of takers)
          expect(t.generator.snapshot("t")!.consecutiveFailures).toBeGreaterThan(0);
      });
      // The replica is promoted: both generators move to it and serve again.
      await pair.promoteReplica();
      const promoted = takers.map((t) => t.ids.count);
      await eventually(() => {
        expectGrown(takers, promoted, 2_000);
        for (const t of takers) expect(t.store.stats().currentHost).toBe(1);
      });

      // The old primary restarts as a primary, writable, with the max id it had when it died. A
      // server started now lists it first.
      await primary.start();
      expect(await pair.query(primary, "SELECT pg_is_in_recovery() AS standby")).toEqual([
        { standby: false },
      ]);
      const late = await taker();
      extra.push(late);
      load.add(late);
      const everyone = [...takers, late];
      // Every generator's loads are refused as a split brain naming both hosts.
      await eventually(() => {
        for (const t of everyone) {
          expect(t.generator.snapshot("t")!.lastErrorReason).toBe("split-brain");
          expect(t.store.stats().splitBrainRefusals).toBeGreaterThan(0);
        }
      });
      expect(late.generator.snapshot("t")!.lastError).toMatch(
        new RegExp(
          `split brain: 2 listed PostgreSQL hosts are writable \\((127\\.0\\.0\\.1:(${primary.port}|${replica.port})(, )?){2}\\)`,
        ),
      );
      // Once the buffered ranges are used up, no id is handed out while both hosts are writable.
      await eventually(() => {
        for (const t of everyone) expect(t.generator.snapshot("t")!.idsLeft).toBe(0n);
      });
      const during = total(everyone);
      const refusedSoFar = everyone.map((t) => t.store.stats().splitBrainRefusals);
      await eventually(() => {
        for (const [i, t] of everyone.entries())
          expect(t.store.stats().splitBrainRefusals).toBeGreaterThan(refusedSoFar[i]! + 2);
      });
      expect(total(everyone)).toBe(during);
      expect(late.ids.count).toBe(0);

      // The operator makes the old primary read-only: every generator serves again, from the new one.
      await pair.query(primary, "ALTER SYSTEM SET default_transaction_read_only = on");
      await pair.query(primary, "SELECT pg_reload_conf()");
      const resumed = everyone.map((t) => t.ids.count);
      await eventually(() => expectGrown(everyone, resumed, 1_000));
      await load.stop();
      expect(counted(everyone).duplicates).toBe(0);
    } finally {
      await load.stop();
      report("primary kill, promotion, split brain", [...takers, ...extra]);
    }
  }, 240_000);

  it("refuses a promoted replica that missed writes (a stale primary) without advancing it, and resumes once fixed", async () => {
    const { pair, taker, database } = await setUp(100);
    const { primary, replica } = pair;
    const takers = [await taker(), await taker()];
    const load = drive(takers);
    try {
      await eventually(() => expect(total(takers)).toBeGreaterThan(2_000));
      await pair.waitForReplica();
      // The replica stops replaying: what the primary commits from now on is lost at the failover.
      await pair.pauseReplication();
      const maxIdOn = async (server: typeof replica) => {
        const rows = await pair.query(
          server,
          "SELECT max_id::text AS max_id FROM leaf_alloc",
          [],
          database,
        );
        return BigInt(String(rows[0]!.max_id));
      };
      const frozen = await maxIdOn(replica);
      const before = takers.map((t) => t.ids.count);
      // Each generator takes at least three more ranges on the primary, past the replica's max id.
      await eventually(() => expectGrown(takers, before, 300));
      await primary.kill();
      await pair.promoteReplica();
      // Both generators refuse the replica's ranges and stop serving the tag.
      await eventually(() => {
        for (const t of takers) {
          expect(t.generator.snapshot("t")!.refused?.reason).toBe("stale-primary");
          expect(t.refusals).toHaveLength(1);
        }
      });
      expect(String(takers[0]!.refusals[0])).toMatch(
        new RegExp(
          `its max id is ${frozen} in .*on 127\\.0\\.0\\.1:${replica.port}, below \\d+.*stale primary: it lacks writes made on 127\\.0\\.0\\.1:${primary.port}`,
        ),
      );
      const stopped = total(takers);
      await sleep(500);
      expect(total(takers)).toBe(stopped);
      // Nothing advanced the replica's max id: no refused take, no retry.
      expect(await maxIdOn(replica)).toBe(frozen);
      const { duplicates: twiceBeforeFix } = counted(takers);
      // The operator sets the max id above every id the servers handed out (the errors say how far).
      const floors = takers.map((t) =>
        BigInt((t.refusals[0] as { details: { floor: string } }).details.floor),
      );
      const floor = floors.sort((a, b) => (a < b ? 1 : a > b ? -1 : 0))[0]!;
      await pair.query(
        replica,
        "UPDATE leaf_alloc SET max_id = $1 WHERE biz_tag = 't'",
        [floor],
        database,
      );
      const fixed = takers.map((t) => t.ids.count);
      await eventually(() => expectGrown(takers, fixed, 1_000));
      await load.stop();
      expect(twiceBeforeFix).toBe(0);
      expect(counted(takers).duplicates).toBe(0);
    } finally {
      await load.stop();
      report("stale primary promoted", takers);
    }
  }, 240_000);
});
