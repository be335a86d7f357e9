// Rows of `pnpm bench segment` for issue #18, segment mode beyond Leaf: ids lost per graceful
// restart (give-back off and on), a burst at 10x the steady rate with MariaDB behind (waits,
// p99.9), and the cost of a range switch paced versus flat out, with no database (its cause).
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import {
  EmbeddedSegmentStore,
  MemorySegmentStore,
  type SegmentGeneratorOptions,
  SegmentIdGenerator,
  type SegmentStore,
} from "@leaf/segment";
import { MysqlSegmentStore } from "@leaf/segment-mysql";
import type { BenchRow } from "./_report";

/** What the bench needs of the test kit's MariaDB handle. */
interface Database {
  urlFor(database: string): string;
}

const STEP = 2_000;
const RESTARTS = 20;
const STEADY_RATE = 50_000;
const BURST_RATE = 10 * STEADY_RATE;
const STEADY_MS = 1_000;
const BURST_MS = 2_000;
/** Ids drawn between two looks at the clock (and an event-loop turn). */
const CHUNK = 64;

/** What the rows of this file measure, appended to the bench's note. */
export const BEYOND_NOTE =
  ` Range switch rows: a memory store (no database, no I/O on the path), paced at ${STEADY_RATE / 1000}k ids/s ` +
  "(a switch every 40 ms) and flat out: paced, the first id of a range costs as much as with MariaDB " +
  "behind, flat out it does not, so the cost is not the database but how rarely the switch code runs " +
  "(see the package README). Restart rows: " +
  `${RESTARTS} graceful restarts, each after a different number of ids; idsLostPerRestart is the ids between one ` +
  "run's last id and the next run's first. Burst rows: " +
  `${STEADY_MS / 1000} s at ${STEADY_RATE / 1000}k ids/s, then ${BURST_MS / 1000} s at ${BURST_RATE / 1000}k ids/s; ` +
  "waits counts burst calls that found no id ready (then awaited nextId); latency is of every burst call; " +
  "after a pause over 5 ms the pacing restarts rather than catching up flat out.";

const yieldToLoop = () => new Promise<void>((resolve) => setImmediate(resolve));

/**
 * Ids lost per graceful restart: a generator draws a number of ids that is not a multiple of the
 * step, closes, and the next one starts on the same table; the ids between the last id of one and
 * the first id of the next were never handed out. Averaged over RESTARTS restarts.
 */
async function idsLostPerRestart(
  openStore: () => Promise<SegmentStore>,
  options: Partial<SegmentGeneratorOptions>,
): Promise<{ idsLostPerRestart: number; restarts: number; duplicates: number }> {
  const seen = new Set<bigint>();
  let duplicates = 0;
  let lost = 0n;
  let last: bigint | undefined;
  for (let r = 0; r <= RESTARTS; r++) {
    const generator = new SegmentIdGenerator({ store: await openStore(), ...options });
    await generator.start();
    const first = await generator.nextId("bench");
    if (last !== undefined) lost += first - last - 1n;
    let id = first;
    // 1,234 + 517 r ids: a different point of a range at every restart.
    for (let i = 0; i < 1_234 + 517 * r; i++) {
      if (seen.has(id)) duplicates++;
      seen.add(id);
      id = await generator.nextId("bench");
    }
    if (seen.has(id)) duplicates++;
    seen.add(id);
    last = id;
    await generator.close();
  }
  return {
    idsLostPerRestart: Number(lost) / RESTARTS,
    restarts: RESTARTS,
    duplicates,
  };
}

/**
 * STEADY_MS at STEADY_RATE, then BURST_MS at BURST_RATE, through `nextIdSync` with `await nextId`
 * when no id is ready. `waits` counts the burst's calls that found no id ready (each then waited
 * for a load, or failed with -3: `errors`); latency is of every call of the burst.
 */
async function burst(generator: SegmentIdGenerator) {
  const draw = async (rate: number, ms: number, timings?: Float64Array) => {
    let waits = 0;
    let errors = 0;
    let n = 0;
    const began = performance.now();
    // The pacing schedule starts here; after a pause (GC, another process) it restarts from now
    // rather than catching up flat out, which would be a far larger burst than the one measured.
    let started = began;
    let paced = 0;
    while (
      performance.now() - began < ms &&
      (timings === undefined || n + CHUNK <= timings.length)
    ) {
      for (let i = 0; i < CHUNK; i++) {
        const t0 = performance.now();
        try {
          generator.nextIdSync("bench");
        } catch {
          waits++;
          try {
            await generator.nextId("bench");
          } catch {
            errors++;
          }
        }
        if (timings !== undefined) timings[n + i] = (performance.now() - t0) * 1000;
      }
      n += CHUNK;
      paced += CHUNK;
      const ahead = started + (paced / rate) * 1000 - performance.now();
      if (ahead >= 1) await new Promise((resolve) => setTimeout(resolve, ahead));
      else {
        if (ahead < -5) {
          started = performance.now();
          paced = 0;
        }
        await yieldToLoop();
      }
    }
    return { waits, errors, ids: n, seconds: (performance.now() - began) / 1000 };
  };
  await draw(STEADY_RATE, STEADY_MS);
  const timings = new Float64Array(Math.ceil((BURST_RATE * BURST_MS * 1.2) / 1000));
  const result = await draw(BURST_RATE, BURST_MS, timings);
  const sorted = timings.subarray(0, result.ids).sort();
  const at = (p: number) => sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))]!;
  return {
    idsPerSecond: Math.round(result.ids / result.seconds),
    waits: result.waits,
    errors: result.errors,
    p50Micros: at(0.5),
    p999Micros: at(0.999),
    maxMicros: sorted[sorted.length - 1]!,
  };
}

/**
 * The first id of each new range (a range switch), paced at STEADY_RATE or flat out, from a memory
 * store: no database, no driver, no I/O on the path. Paced, a switch comes every 40 ms.
 */
async function switchCost(rate: number) {
  const store = new MemorySegmentStore();
  await store.createTag({ tag: "bench", step: STEP, startId: 0n });
  const generator = new SegmentIdGenerator({ store, dynamicStep: false });
  await generator.start();
  const count = rate > 0 ? 400_000 : 2_000_000;
  for (let i = 0; i < 40_000; i++) {
    try {
      generator.nextIdSync("bench");
    } catch {
      await generator.nextId("bench");
    }
    if (i % CHUNK === 0) await yieldToLoop();
  }
  const switches: number[] = [];
  const others: number[] = [];
  const started = performance.now();
  let n = 0;
  while (n < count) {
    for (let i = 0; i < CHUNK; i++, n++) {
      const t0 = performance.now();
      let id: bigint;
      try {
        id = generator.nextIdSync("bench");
      } catch {
        id = await generator.nextId("bench");
      }
      const micros = (performance.now() - t0) * 1000;
      if (id % BigInt(STEP) === 0n) switches.push(micros);
      else if (others.length < 100_000) others.push(micros);
    }
    const ahead = rate > 0 ? started + (n / rate) * 1000 - performance.now() : 0;
    if (ahead >= 1) await new Promise((resolve) => setTimeout(resolve, ahead));
    else await yieldToLoop();
  }
  await generator.close();
  const median = (values: number[]) =>
    Float64Array.from(values).sort()[Math.floor(values.length / 2)]!;
  return {
    rangeSwitches: switches.length,
    switchP50Micros: median(switches),
    p50Micros: median(others),
  };
}

/** The switch rows: memory store, paced and flat out. */
export async function switchRows(): Promise<BenchRow[]> {
  return [
    {
      name: `range switch, memory store, step ${STEP}, ${STEADY_RATE / 1000}k ids/s`,
      ...(await switchCost(STEADY_RATE)),
    },
    { name: `range switch, memory store, step ${STEP}, flat out`, ...(await switchCost(0)) },
  ];
}

/** The restart and burst rows, on MariaDB `db` (database `database`) and an embedded store. */
export async function beyondLeafRows(db: Database, database: string): Promise<BenchRow[]> {
  const rows: BenchRow[] = [];
  let tables = 0;
  const mysqlTable = async () => {
    const table = `leaf_beyond_${tables++}`;
    const store = new MysqlSegmentStore({ url: db.urlFor(database), table });
    await store.createSchema();
    await store.createTag({ tag: "bench", step: STEP, startId: 0n });
    await store.close();
    return () => Promise.resolve(new MysqlSegmentStore({ url: db.urlFor(database), table }));
  };

  for (const giveBackOnClose of [false, true]) {
    const open = await mysqlTable();
    rows.push({
      name: `graceful restart, MariaDB, step ${STEP}, give-back ${giveBackOnClose ? "on" : "off"}`,
      ...(await idsLostPerRestart(open, { giveBackOnClose, dynamicStep: false })),
    });
  }
  const dir = mkdtempSync(join(tmpdir(), "leaf-bench-embedded-"));
  try {
    const first = new EmbeddedSegmentStore({ dir });
    await first.createTag({ tag: "bench", step: STEP, startId: 0n });
    await first.close();
    rows.push({
      name: `graceful restart, embedded store, step ${STEP}, give-back on`,
      ...(await idsLostPerRestart(() => Promise.resolve(new EmbeddedSegmentStore({ dir })), {
        dynamicStep: false,
      })),
    });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }

  rows.push(...(await burstRows(db, database)));
  return rows;
}

/** What the burst rows need of @leaf/segment (another build of it can be passed, to compare). */
export interface SegmentModule {
  MysqlSegmentStore: typeof MysqlSegmentStore;
  SegmentIdGenerator: typeof SegmentIdGenerator;
}

/** The burst rows: fixed step and dynamic step, each on a new table. */
export async function burstRows(
  db: Database,
  database: string,
  segment: SegmentModule = { MysqlSegmentStore, SegmentIdGenerator },
  label = "",
): Promise<BenchRow[]> {
  const rows: BenchRow[] = [];
  for (const dynamicStep of [false, true]) {
    const table = `leaf_burst_${Date.now().toString(36)}_${rows.length}`;
    const setup = new segment.MysqlSegmentStore({ url: db.urlFor(database), table });
    await setup.createSchema();
    await setup.createTag({ tag: "bench", step: STEP, startId: 0n });
    await setup.close();
    const store = new segment.MysqlSegmentStore({ url: db.urlFor(database), table });
    const generator = new segment.SegmentIdGenerator({ store, dynamicStep });
    await generator.start();
    rows.push({
      name: `burst ${STEADY_RATE / 1000}k -> ${BURST_RATE / 1000}k ids/s, MariaDB, ${dynamicStep ? "dynamic step from" : "fixed step"} ${STEP}${label}`,
      ...(await burst(generator)),
    });
    await generator.close();
  }
  return rows;
}
