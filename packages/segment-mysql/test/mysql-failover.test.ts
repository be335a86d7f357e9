// Failover of the MySQL segment store across a real MariaDB primary and replica (binary log,
// CHANGE MASTER TO, replica read_only=ON): the primary is SIGKILLed, the replica promoted, and the old
// primary comes back writable. Ids are counted over every generator: none may repeat.

import { SegmentIdGenerator } from "@leaf/segment";
import { countDuplicates, type MysqlReplicaPair, startMysqlReplicaPair } from "@leaf/testkit";
import { afterEach, describe, expect, it, vi } from "vitest";
import { MysqlSegmentStore } from "../src/index";

/** Retries `check` until it passes; generous, since these machines are shared (not a speed bound). */
const eventually = <T>(check: () => T | Promise<T>, timeout = 60_000) =>
  vi.waitFor(check, { timeout, interval: 50 });

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

let pair: MysqlReplicaPair | undefined;
const generators: SegmentIdGenerator[] = [];

afterEach(async () => {
  for (const g of generators.splice(0)) await g.close().catch(() => {});
  await pair?.dispose();
  pair = undefined;
});

/** One generator standing for one server process: its own store, pools and per-tag memory. */
interface Taker {
  name: string;
  generator: SegmentIdGenerator;
  store: MysqlSegmentStore;
  ids: bigint[];
  errors: unknown[];
  refusals: unknown[];
}

async function setUp(semiSync: boolean, step: number) {
  pair = await startMysqlReplicaPair({ semiSync });
  const { primary, replica } = pair;
  const database = await primary.createDatabase("failover");
  const table = "leaf_alloc";
  const store = new MysqlSegmentStore({ url: primary.urlFor(database), table });
  await store.createSchema();
  await store.createTag({ tag: "t", step, startId: 1n });
  await store.close();
  await pair.waitForReplica();
  const hosts = [primary, replica].map((s) => ({ host: s.host, port: s.port }));
  const taker = async (name: string): Promise<Taker> => {
    const store = new MysqlSegmentStore({
      hosts,
      user: primary.user,
      database,
      table,
      connectTimeoutMs: 1_000,
      queryTimeoutMs: 2_000,
    });
    const t: Taker = { name, generator: undefined!, store, ids: [], errors: [], refusals: [] };
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
  return { pair, database, table, taker };
}

/** Takes ids from every taker until stopped, as a busy server does; failures are kept, not thrown. */
function drive(takers: Taker[]) {
  let running = true;
  const loop = async (t: Taker) => {
    while (running) {
      try {
        for (const id of await t.generator.nextIds("t", 25)) t.ids.push(id);
      } catch (error) {
        t.errors.push(error);
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

/** Each taker handed out more than `n` ids since `before` (its counts then). */
function expectGrown(takers: Taker[], before: number[], n: number): void {
  for (const [i, t] of takers.entries()) expect(t.ids.length).toBeGreaterThan(before[i]! + n);
}

/** Ids handed out more than once, across every taker. */
const duplicates = (takers: Taker[]) => countDuplicates(takers.map((t) => t.ids)).duplicates;

const total = (takers: Taker[]) => takers.reduce((n, t) => n + t.ids.length, 0);

describe("MysqlSegmentStore failover over a real primary and replica", () => {
  it("serves no id twice through a primary kill, a promotion and the old primary back writable, and refuses the split brain", async () => {
    const { pair, taker } = await setUp(true, 200);
    const { primary, replica } = pair;
    const one = await taker("one");
    const two = await taker("two");
    const takers = [one, two];
    const load = drive(takers);
    try {
      await eventually(() => expect(total(takers)).toBeGreaterThan(10_000));

      // The primary dies; both generators run out of buffered ids and fail their loads.
      await primary.kill();
      await eventually(() => {
        for (const t of takers)
          expect(t.generator.snapshot("t")!.consecutiveFailures).toBeGreaterThan(0);
      });
      // The operator promotes the replica: both generators move to it and keep serving.
      await pair.promoteReplica();
      const promoted = takers.map((t) => t.ids.length);
      await eventually(() => {
        expectGrown(takers, promoted, 2_000);
        for (const t of takers) expect(t.store.stats().currentHost).toBe(1);
      });

      // The old primary restarts writable (read_only is not persisted), with a max id from before
      // the promotion. A server started now lists it first.
      await primary.start();
      expect(await pair.query(primary, "SELECT @@global.read_only AS ro")).toEqual([{ ro: "0" }]);
      const late = await taker("late");
      load.add(late);
      const everyone = [...takers, late];
      // Every generator's loads are refused as a split brain naming both hosts; none is served.
      await eventually(() => {
        for (const t of everyone) {
          expect(t.generator.snapshot("t")!.lastErrorReason).toBe("split-brain");
          expect(t.store.stats().splitBrainRefusals).toBeGreaterThan(0);
        }
      });
      for (const t of everyone) {
        expect(t.generator.snapshot("t")!.lastError).toMatch(
          new RegExp(
            `split brain: 2 listed MySQL hosts are writable \\((127\\.0\\.0\\.1:(${primary.port}|${replica.port})(, )?){2}\\)`,
          ),
        );
      }
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
      expect(late.ids).toEqual([]);

      // The operator makes the old primary read-only: every generator serves again, from the new one.
      await pair.query(primary, "SET GLOBAL read_only = ON");
      const resumed = everyone.map((t) => t.ids.length);
      await eventually(() => {
        expectGrown(everyone, resumed, 1_000);
      });
      await load.stop();
      expect(duplicates(everyone)).toBe(0);
      expect(total(everyone)).toBeGreaterThan(20_000);
    } finally {
      await load.stop();
    }
  }, 240_000);

  it("refuses a promoted replica that lost writes (a stale primary) without advancing it, and resumes once fixed", async () => {
    const { pair, taker, database } = await setUp(false, 100);
    const { primary, replica } = pair;
    const one = await taker("one");
    const two = await taker("two");
    const takers = [one, two];
    const load = drive(takers);
    try {
      await eventually(() => expect(total(takers)).toBeGreaterThan(2_000));
      // The replica falls behind: what the primary commits from now on is lost at the failover.
      await pair.pauseReplication();
      const maxIdOn = async (server: typeof replica) => {
        const rows = (await pair.query(
          server,
          `SELECT max_id FROM ${database}.leaf_alloc`,
        )) as Array<{ max_id: string }>;
        return BigInt(rows[0]!.max_id);
      };
      const frozen = await maxIdOn(replica);
      const before = takers.map((t) => t.ids.length);
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
      expect(String(one.refusals[0])).toMatch(
        new RegExp(
          `its max id is ${frozen} in .*on 127\\.0\\.0\\.1:${replica.port}, below \\d+.*stale primary: it lacks writes made on 127\\.0\\.0\\.1:${primary.port}`,
        ),
      );
      const stopped = total(takers);
      await sleep(500);
      expect(total(takers)).toBe(stopped);
      // Nothing advanced the replica's max id: no refused take, no retry.
      expect(await maxIdOn(replica)).toBe(frozen);
      // The operator sets the max id above every id the servers handed out (the errors say how far).
      const floors = takers.map((t) =>
        BigInt((t.refusals[0] as { details: { floor: string } }).details.floor),
      );
      const floor = floors.sort((a, b) => (a < b ? 1 : a > b ? -1 : 0))[0]!;
      await pair.query(
        replica,
        `UPDATE ${database}.leaf_alloc SET max_id = ? WHERE biz_tag = 't'`,
        [floor],
      );
      const fixed = takers.map((t) => t.ids.length);
      await eventually(() => expectGrown(takers, fixed, 1_000));
      await load.stop();
      expect(duplicates(takers)).toBe(0);
    } finally {
      await load.stop();
    }
  }, 240_000);
});
