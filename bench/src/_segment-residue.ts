// Rows of `pnpm bench segment` for issue #30: a residue set of two MariaDB databases, each on a
// private server of its own, while the database serving the tag is stopped (SIGSTOP) or killed in
// the middle of the run: how many calls wait for a range, the longest wait, and failed calls.
import { performance } from "node:perf_hooks";
import { formResidueSet, ResidueSegmentStore, SegmentIdGenerator } from "@leaf/segment";
import { MysqlSegmentStore } from "@leaf/segment-mysql";
import { type MysqlHandle, startMysql } from "@leaf/testkit";
import type { BenchRow } from "./_report";

const STEP = 2_000;
const RATE = 50_000;
const IDS = 1_000_000;
/** Ids drawn between two looks at the clock (and an event-loop turn). */
const CHUNK = 128;
/** The residue store's default: how long a range request waits for one database. */
const HEDGE_MS = 1_000;

/** What the rows of this file measure, appended to the bench's note. */
export const RESIDUE_NOTE =
  ` Residue set rows: two MariaDB servers, a database on each formed into a set (ids % 2), step ${STEP}, ` +
  `${RATE / 1000}k ids/s through nextIdSync (nextId when no id is ready), ${IDS.toLocaleString("en-US")} ids; ` +
  `after half of them the server of the database serving the tag is stopped (SIGSTOP) or killed, and let ` +
  `run again after the row. waits: calls that found no id ready; longestWaitMs: the longest call; ` +
  `failedCalls: calls that got an error; idsFromOther: ids of the other database's class after the fault ` +
  `(hedgeMs ${HEDGE_MS}, the residue store's default).`;

const yieldToLoop = () => new Promise<void>((resolve) => setImmediate(resolve));

function percentile(sorted: Float64Array, p: number): number {
  if (sorted.length === 0) return 0;
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))]!;
}

/** One row: a fresh set on both servers, `fault` applied to the first one halfway. */
async function faultRow(
  name: string,
  servers: [MysqlHandle, MysqlHandle],
  fault: (db: MysqlHandle) => Promise<void>,
  undo: (db: MysqlHandle) => Promise<void>,
): Promise<BenchRow> {
  const databases = await Promise.all(servers.map((s) => s.createDatabase("bench_residue")));
  const open = () => servers.map((s, i) => new MysqlSegmentStore({ url: s.urlFor(databases[i]!) }));
  const setUp = open();
  for (const store of setUp) await store.createSchema();
  await formResidueSet(setUp);
  for (const store of setUp) await store.close();
  const store = new ResidueSegmentStore({ members: open(), hedgeMs: HEDGE_MS });
  await store.createTag({ tag: "bench", step: STEP, startId: 0n });
  const generator = new SegmentIdGenerator({ store, dynamicStep: false });
  await generator.start();
  const times = new Float64Array(IDS);
  let n = 0;
  let waits = 0;
  let failed = 0;
  let fromOther = 0;
  let faulted: Promise<void> | undefined;
  const started = performance.now();
  try {
    while (n < IDS) {
      for (let i = 0; i < CHUNK && n < IDS; i++) {
        if (n === IDS / 2) faulted = fault(servers[0]);
        const t0 = performance.now();
        let id: bigint | undefined;
        try {
          id = generator.nextIdSync("bench");
        } catch {
          waits++;
          try {
            id = await generator.nextId("bench");
          } catch {
            failed++;
          }
        }
        times[n++] = (performance.now() - t0) * 1000;
        if (faulted !== undefined && id !== undefined && id % 2n === 1n) fromOther++;
      }
      const ahead = started + (n / RATE) * 1000 - performance.now();
      if (ahead >= 1) await new Promise((resolve) => setTimeout(resolve, ahead));
      else await yieldToLoop();
    }
  } finally {
    // The server runs again before the store closes: a pool closing a connection to a stopped
    // server waits for its answer.
    await faulted;
    await undo(servers[0]);
    await generator.close();
  }
  const seconds = (performance.now() - started) / 1000;
  times.sort();
  return {
    name,
    idsPerSecond: Math.round(IDS / seconds),
    p50Micros: percentile(times, 0.5),
    p999Micros: percentile(times, 0.999),
    waits,
    longestWaitMs: Math.round(times[times.length - 1]! / 100) / 10,
    failedCalls: failed,
    idsFromOther: fromOther,
  };
}

/** The residue set rows: two private MariaDB servers, the serving one stopped, then killed. */
export async function residueRows(): Promise<BenchRow[]> {
  const servers = [await startMysql({ useEnv: false }), await startMysql({ useEnv: false })] as [
    MysqlHandle,
    MysqlHandle,
  ];
  const paced = `step ${STEP}, ${RATE / 1000}k ids/s`;
  try {
    return [
      await faultRow(
        `nextIdSync, residue set of 2 MariaDB, ${paced}, the serving one SIGSTOPped mid-run`,
        servers,
        async (db) => db.pause(),
        async (db) => db.resume(),
      ),
      await faultRow(
        `nextIdSync, residue set of 2 MariaDB, ${paced}, the serving one killed mid-run`,
        servers,
        (db) => db.kill(),
        (db) => db.start(),
      ),
    ];
  } finally {
    for (const s of servers) await s.dispose();
  }
}
