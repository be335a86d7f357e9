// `pnpm bench segment`: segment mode's id paths in one run. In process (memory store): the
// synchronous and async paths against a bare `x++` bigint loop. With MariaDB, PostgreSQL and Redis
// behind (started here by the test kit, Leaf's example step of 2,000 so that ranges switch often):
// the latency of every id, across range switches, and ids per database round trip.
import { performance } from "node:perf_hooks";
import { MemorySegmentStore, SegmentIdGenerator, type SegmentStore } from "@leaf/segment";
import { MysqlSegmentStore } from "@leaf/segment-mysql";
import { PostgresSegmentStore } from "@leaf/segment-postgres";
import { RedisSegmentStore } from "@leaf/segment-redis";
import { startMysql, startPostgres, startRedis } from "@leaf/testkit";
import { type BenchRow, report } from "./_report";
import { BEYOND_NOTE, beyondLeafRows, switchRows } from "./_segment-beyond";
import { RESIDUE_NOTE, residueRows } from "./_segment-residue";

const ROUNDS = 5;
const IN_PROCESS_IDS = 10_000_000;
/** Ids drawn between two event-loop turns, so that background loads can complete. */
const CHUNK = 10_000;
const MYSQL_IDS = 1_000_000;
/**
 * Twice this many ids are drawn before measuring (20 ranges), so that the code paths are compiled.
 */
const MYSQL_WARMUP_IDS = 20_000;
/** Java Leaf's example row (leaf-segment-test) has step 2,000. */
const MYSQL_STEP = 2_000;
/** Not a divisor of the step, so that range switches do not always fall right after a turn. */
const MYSQL_CHUNK = 128;
/**
 * Ids per second drawn in the fixed-step runs: a busy node (Meituan quotes ~50,000 QPS per Leaf
 * node). A range then lasts 40 ms and its preload, started after 10%, has 36 ms to arrive.
 */
const MYSQL_RATE = 50_000;

const yieldToLoop = () => new Promise<void>((resolve) => setImmediate(resolve));

/** Best of ROUNDS runs of `run`, which returns ids per second. */
async function best(run: () => Promise<number> | number): Promise<number> {
  let top = 0;
  for (let i = 0; i < ROUNDS; i++) top = Math.max(top, await run());
  return top;
}

/**
 * The one harness of every in-process row: `count` ids, CHUNK at a time by `draw` (a function of
 * its own per row, so that each row's loop is compiled for its own calls), with an event-loop turn
 * after each chunk, as a server drawing ids between requests has. Returns ids per second.
 */
async function chunked(draw: () => void | Promise<void>, count = IN_PROCESS_IDS): Promise<number> {
  const started = performance.now();
  for (let done = 0; done < count; done += CHUNK) {
    const pending = draw();
    if (pending !== undefined) await pending;
    await yieldToLoop();
  }
  return count / ((performance.now() - started) / 1000);
}

/** Best of ROUNDS `chunked(draw)` runs, after one run unmeasured so that `draw` is compiled. */
async function measure(draw: () => void | Promise<void>, count = IN_PROCESS_IDS): Promise<number> {
  await chunked(draw, count);
  return best(() => chunked(draw, count));
}

// Each draw below keeps its last id in a sink, so that no engine could drop its loop.
let sink = 0n;
let numberSink = 0;

let bigintLoopFrom = 0n;
/** The bigint reference: `x++` on a loop-local bigint. */
function drawBigintLoop(): void {
  let x = bigintLoopFrom;
  for (let i = 0; i < CHUNK; i++) x++;
  bigintLoopFrom = x;
  sink ^= x;
}

const drawIdSync = (generator: SegmentIdGenerator) => (): void => {
  let last = 0n;
  for (let i = 0; i < CHUNK; i++) last = generator.nextIdSync("bench");
  sink ^= last;
};

const drawIdAsync = (generator: SegmentIdGenerator) => async (): Promise<void> => {
  let last = 0n;
  for (let i = 0; i < CHUNK; i++) last = await generator.nextId("bench");
  sink ^= last;
};

let bareNumber = 0;
/** The bare number counter: `n++` on a number that outlives the call, and nothing else. */
function nextBareNumber(): number {
  return bareNumber++;
}

function drawBareNumber(): void {
  let last = 0;
  for (let i = 0; i < CHUNK; i++) last = nextBareNumber();
  numberSink += last;
}

let loopFrom = 0;
/**
 * `x++` on a loop-local number: V8 keeps `x` in a register for the whole loop, so no state is
 * read or written per id. Nothing outside the loop can draw from it: not a counter, an upper bound.
 */
function drawNumberLoop(): void {
  let x = loopFrom;
  let last = 0;
  for (let i = 0; i < CHUNK; i++) last = x++;
  loopFrom = x;
  numberSink += last;
}

/** A counter that checks a bound: the state a range needs, in an object field, and nothing else. */
class BoundedCounter {
  value = 0;
  limit = Number.MAX_SAFE_INTEGER;
  next(): number {
    const v = this.value;
    if (v < this.limit) {
      this.value = v + 1;
      return v;
    }
    throw new Error("bound reached");
  }
}

const drawBounded = (counter: BoundedCounter) => (): void => {
  let last = 0;
  for (let i = 0; i < CHUNK; i++) last = counter.next();
  numberSink += last;
};

const drawNumberSync = (generator: SegmentIdGenerator) => (): void => {
  let last = 0;
  for (let i = 0; i < CHUNK; i++) last = generator.nextNumberSync("bench");
  numberSink += last;
};

const drawNumberAsync = (generator: SegmentIdGenerator) => async (): Promise<void> => {
  let last = 0;
  for (let i = 0; i < CHUNK; i++) last = await generator.nextNumber("bench");
  numberSink += last;
};

/** A started generator on a memory store, Leaf's defaults (dynamic step from 100,000). */
async function inProcessGenerator(): Promise<SegmentIdGenerator> {
  const store = new MemorySegmentStore();
  await store.createTag({ tag: "bench", step: 100_000 });
  const generator = new SegmentIdGenerator({ store });
  await generator.start();
  return generator;
}

/** The bigint paths against a loop-local bigint `x++`. Returns the rows and nextIdSync's rate. */
async function bigintRows(): Promise<{ rows: BenchRow[]; sync: number }> {
  const generator = await inProcessGenerator();
  const bare = await measure(drawBigintLoop);
  const sync = await measure(drawIdSync(generator));
  const asyncRate = await measure(drawIdAsync(generator), IN_PROCESS_IDS / 5);
  await generator.close();
  const ratioToBare = (rate: number) => Number((rate / bare).toFixed(2));
  const rows: BenchRow[] = [
    { name: "bare bigint x++ loop (reference)", idsPerSecond: Math.round(bare), ratioToBare: 1 },
    {
      name: "nextIdSync, in process (memory store)",
      idsPerSecond: Math.round(sync),
      ratioToBare: ratioToBare(sync),
    },
    {
      name: "await nextId, in process (memory store)",
      idsPerSecond: Math.round(asyncRate),
      ratioToBare: ratioToBare(asyncRate),
    },
  ];
  return { rows, sync };
}

/**
 * The number paths (issue #17) in the same run and harness as the bigint ones: `nextNumberSync` and
 * `await nextNumber` against the bare number counter, a counter with a bound check, a loop-local
 * `x++`, and `nextIdSync` (`syncBigint`, ids/s).
 */
async function numberRows(syncBigint: number): Promise<BenchRow[]> {
  const generator = await inProcessGenerator();
  const bare = await measure(drawBareNumber);
  const loop = await measure(drawNumberLoop);
  const bounded = await measure(drawBounded(new BoundedCounter()));
  const sync = await measure(drawNumberSync(generator));
  const asyncRate = await measure(drawNumberAsync(generator), IN_PROCESS_IDS / 5);
  await generator.close();
  const row = (name: string, rate: number): BenchRow => ({
    name,
    idsPerSecond: Math.round(rate),
    ratioToBareNumber: Number((rate / bare).toFixed(2)),
    ratioToBoundedCounter: Number((rate / bounded).toFixed(2)),
    ratioToNextIdSync: Number((rate / syncBigint).toFixed(2)),
  });
  return [
    row("bare number counter: n++ on a number kept between calls (reference)", bare),
    row("number x++ on a loop-local variable (a register; nothing kept between calls)", loop),
    row("number counter with a bound check, in an object field (the least a range needs)", bounded),
    row("nextNumberSync, in process (memory store)", sync),
    row("await nextNumber, in process (memory store)", asyncRate),
  ];
}

function percentile(sorted: Float64Array, p: number): number {
  if (sorted.length === 0) return 0;
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))]!;
}

/**
 * Latency of each of `count` ids, drawn at `rate` ids/s (0: as fast as possible) with an event-loop
 * turn every MYSQL_CHUNK ids. With `step`, switch calls (the first id of each range) are also
 * reported apart.
 */
async function latency(
  generator: SegmentIdGenerator,
  mode: "sync" | "async",
  rate: number,
  count: number,
  step?: bigint,
) {
  for (let i = 0; i < MYSQL_WARMUP_IDS; i++) {
    try {
      generator.nextIdSync("bench");
    } catch {
      await generator.nextId("bench");
    }
    await generator.nextId("bench");
    if (i % MYSQL_CHUNK === 0) await yieldToLoop();
  }
  const all = new Float64Array(count);
  const switches: number[] = [];
  let n = 0;
  let misses = 0;
  const started = performance.now();
  while (n < count) {
    for (let i = 0; i < MYSQL_CHUNK && n < count; i++) {
      const t0 = performance.now();
      let id: bigint;
      if (mode === "sync") {
        try {
          id = generator.nextIdSync("bench");
        } catch {
          misses++;
          id = await generator.nextId("bench");
        }
      } else {
        id = await generator.nextId("bench");
      }
      const micros = (performance.now() - t0) * 1000;
      all[n++] = micros;
      if (step !== undefined && id % step === 0n) switches.push(micros);
    }
    const ahead = rate > 0 ? started + (n / rate) * 1000 - performance.now() : 0;
    if (ahead >= 1) await new Promise((resolve) => setTimeout(resolve, ahead));
    else await yieldToLoop();
  }
  const seconds = (performance.now() - started) / 1000;
  all.sort();
  const sortedSwitches = Float64Array.from(switches).sort();
  return {
    idsPerSecond: Math.round(count / seconds),
    p50Micros: percentile(all, 0.5),
    p999Micros: percentile(all, 0.999),
    maxMicros: all[all.length - 1]!,
    ...(step === undefined
      ? {}
      : {
          rangeSwitches: switches.length,
          switchP50Micros: percentile(sortedSwitches, 0.5),
          switchP99Micros: percentile(sortedSwitches, 0.99),
          switchP999Micros: percentile(sortedSwitches, 0.999),
          switchMaxMicros: sortedSwitches[sortedSwitches.length - 1] ?? 0,
        }),
    syncMisses: misses,
  };
}

/** A store with a database behind that counts its round trips (each SQL store, the Redis store). */
type CountedStore = SegmentStore & { stats(): { roundTrips: number } };

/**
 * The rows of one store with a database behind (`label`: "MariaDB", ...): step MYSQL_STEP paced at
 * MYSQL_RATE through nextIdSync and await nextId, then a dynamic step from MYSQL_STEP flat out.
 * `open` gives a store on a table (or namespace) of its own each time, ready for createTag.
 */
async function storeRows(label: string, open: () => Promise<CountedStore>): Promise<BenchRow[]> {
  const rows: BenchRow[] = [];
  const run = async (name: string, mode: "sync" | "async", dynamic: boolean) => {
    const store = await open();
    await store.createTag({ tag: "bench", step: MYSQL_STEP, startId: 0n });
    const generator = new SegmentIdGenerator({ store, dynamicStep: dynamic });
    await generator.start();
    const result = dynamic
      ? await latency(generator, mode, 0, MYSQL_IDS)
      : await latency(generator, mode, MYSQL_RATE, MYSQL_IDS, BigInt(MYSQL_STEP));
    const trips = store.stats().roundTrips;
    await generator.close();
    rows.push({
      name,
      ...result,
      idsPerRoundTrip: Math.round((MYSQL_IDS + 2 * MYSQL_WARMUP_IDS) / trips),
    });
  };
  const paced = `step ${MYSQL_STEP}, ${MYSQL_RATE / 1000}k ids/s`;
  await run(`nextIdSync, ${label}, ${paced}`, "sync", false);
  await run(`await nextId, ${label}, ${paced}`, "async", false);
  await run(`nextIdSync, ${label}, dynamic step from ${MYSQL_STEP}, flat out`, "sync", true);
  return rows;
}

/** The PostgreSQL rows: @leaf/segment-postgres on a private server, a table per row. */
async function postgresRows(): Promise<BenchRow[]> {
  const server = await startPostgres();
  try {
    const database = await server.createDatabase("bench_segment");
    let tables = 0;
    return await storeRows("PostgreSQL", async () => {
      const table = `leaf_alloc_${tables++}`;
      const store = new PostgresSegmentStore({ url: server.urlFor(database), table });
      await store.createSchema();
      return store;
    });
  } finally {
    await server.dispose();
  }
}

/** The Redis rows: @leaf/segment-redis on a private server, a namespace per row (created once). */
async function redisRows(): Promise<BenchRow[]> {
  const server = await startRedis();
  try {
    let namespaces = 0;
    return await storeRows("Redis", async () => {
      const store = new RedisSegmentStore({ url: server.url, namespace: `bench${namespaces++}` });
      await store.createNamespace();
      return store;
    });
  } finally {
    await server.dispose();
  }
}

async function main(): Promise<void> {
  const rows: BenchRow[] = [];

  // In process: a memory store, Leaf's defaults (dynamic step from 100,000).
  const bigint = await bigintRows();
  rows.push(...bigint.rows, ...(await numberRows(bigint.sync)));

  // The cost of a range switch alone: memory store, the same small step, flat out.
  const switching = new MemorySegmentStore();
  await switching.createTag({ tag: "bench", step: MYSQL_STEP, startId: 0n });
  const switcher = new SegmentIdGenerator({ store: switching, dynamicStep: false });
  await switcher.start();
  rows.push({
    name: `nextIdSync, memory store, step ${MYSQL_STEP}, flat out`,
    ...(await latency(switcher, "sync", 0, IN_PROCESS_IDS, BigInt(MYSQL_STEP))),
  });
  await switcher.close();

  // MariaDB behind: fixed small step, so a range switch every MYSQL_STEP ids.
  const db = await startMysql();
  try {
    const database = await db.createDatabase("bench_segment");
    let tables = 0;
    rows.push(
      ...(await storeRows("MariaDB", async () => {
        const store = new MysqlSegmentStore({
          url: db.urlFor(database),
          table: `leaf_alloc_${tables++}`,
        });
        await store.createSchema();
        return store;
      })),
    );
    rows.push(...(await postgresRows()), ...(await redisRows()));
    rows.push(...(await switchRows()), ...(await beyondLeafRows(db, database)));
    rows.push(...(await residueRows()));
  } finally {
    await db.dispose();
  }

  report(
    "segment",
    rows,
    `In process: best of ${ROUNDS} runs of ${IN_PROCESS_IDS.toLocaleString("en-US")} ids (async: a fifth), ` +
      `an event-loop turn every ${CHUNK.toLocaleString("en-US")} ids. MariaDB, PostgreSQL and Redis (private servers on this machine, one table or Redis namespace per row): ` +
      `${MYSQL_IDS.toLocaleString("en-US")} ids per row; latency rows time each call, with an event-loop turn every ${MYSQL_CHUNK} ids; ` +
      `ratioToBareNumber / ratioToBoundedCounter / ratioToNextIdSync: the number paths against the bare number counter, ` +
      `a counter with a bound check in an object field, and nextIdSync, all of the same run and harness; ` +
      `switch* columns are the calls that switched to the next range; syncMisses counts sync calls that found ` +
      `no id ready (then served by nextId, waiting for the load). Round trips include start-up.` +
      ` (${(2 * MYSQL_WARMUP_IDS).toLocaleString("en-US")} ids drawn first, unmeasured.)` +
      BEYOND_NOTE +
      RESIDUE_NOTE,
  );
  // Keeps the measured loops' results alive, so that no engine could drop them.
  if (sink === -1n || numberSink === -1) console.log("sink", sink, numberSink);
}

await main();
