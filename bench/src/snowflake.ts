// `pnpm bench snowflake`: ids/s and duplicates in 5 million ids from @leaf/core's generator
// (single, batch, cached) and from other snowflake libraries for Node.js, all in one run on one
// machine.

import { CachedSnowflakeGenerator, defineLayout, layouts, SnowflakeGenerator } from "@leaf/core";
import { Snowflake as SapphireSnowflake } from "@sapphire/snowflake";
import FlakeId from "flake-idgen";
import { Snowflake as NodejsSnowflake } from "nodejs-snowflake";
import { Snowyflake } from "snowyflake";
import { type BenchRow, report } from "./_report";

const COUNT = Number(process.env.BENCH_IDS ?? 5_000_000);

/** Sorts the ids and counts the ones equal to their predecessor. */
function duplicates(ids: BigInt64Array): number {
  ids.sort();
  let dup = 0;
  for (let i = 1; i < ids.length; i++) if (ids[i] === ids[i - 1]) dup++;
  return dup;
}

function row(name: string, ids: BigInt64Array, ms: number, note = ""): BenchRow {
  const idsPerSecond = Math.round((ids.length / ms) * 1000);
  return {
    name,
    idsPerSecond,
    nsPerId: Number(((ms * 1e6) / ids.length).toFixed(1)),
    duplicates: duplicates(ids),
    note,
  };
}

/** Times a synchronous producer of one id per call. */
function measure(name: string, next: () => bigint, note?: string): BenchRow {
  for (let i = 0; i < 200_000; i++) next(); // warm-up
  const ids = new BigInt64Array(COUNT);
  const start = performance.now();
  for (let i = 0; i < COUNT; i++) ids[i] = next();
  return row(name, ids, performance.now() - start, note);
}

function measureBatch(
  name: string,
  nextIds: (n: number) => bigint[],
  batch: number,
  note?: string,
): BenchRow {
  nextIds(batch);
  const ids = new BigInt64Array(COUNT);
  const start = performance.now();
  for (let i = 0; i < COUNT; ) {
    const chunk = nextIds(Math.min(batch, COUNT - i));
    for (const id of chunk) ids[i++] = id;
  }
  return row(name, ids, performance.now() - start, note);
}

async function measureBatchAsync(
  name: string,
  nextIds: (n: number) => Promise<bigint[]>,
  batch: number,
  note?: string,
): Promise<BenchRow> {
  await nextIds(batch);
  const ids = new BigInt64Array(COUNT);
  const start = performance.now();
  for (let i = 0; i < COUNT; ) {
    const chunk = await nextIds(Math.min(batch, COUNT - i));
    for (const id of chunk) ids[i++] = id;
  }
  return row(name, ids, performance.now() - start, note);
}

/** Times a producer of one id per call as a JS number; duplicates counted as for bigints. */
function measureNumber(name: string, next: () => number, count: number, note: string): BenchRow {
  for (let i = 0; i < 200_000; i++) next(); // warm-up
  const ids = new Float64Array(count);
  const start = performance.now();
  for (let i = 0; i < count; i++) ids[i] = next();
  const ms = performance.now() - start;
  ids.sort();
  let dup = 0;
  for (let i = 1; i < ids.length; i++) if (ids[i] === ids[i - 1]) dup++;
  return {
    name,
    idsPerSecond: Math.round((count / ms) * 1000),
    nsPerId: Number(((ms * 1e6) / count).toFixed(1)),
    duplicates: dup,
    note,
  };
}

/**
 * `nextNumber()` against `nextId()` on one 53-bit layout with Leaf's sequence space (41 bits of ms,
 * no worker bits, 12 of sequence: 4,096 ids per ms), and on `layouts.safe53ms` (256 ids per ms).
 */
function numberRows(): BenchRow[] {
  const wide53 = defineLayout({
    name: "53-bit 41/0/12",
    timestampBits: 41,
    workerBits: 0,
    sequenceBits: 12,
    unitMillis: 1,
    epoch: Date.UTC(2020, 0, 1),
  });
  const asNumbers = new SnowflakeGenerator({ workerId: 0, layout: wide53, randomSequenceStart: 0 });
  const asBigints = new SnowflakeGenerator({ workerId: 0, layout: wide53, randomSequenceStart: 0 });
  const safe = new SnowflakeGenerator({
    workerId: 1,
    layout: layouts.safe53ms,
    randomSequenceStart: 0,
  });
  return [
    measureNumber(
      "@leaf/core nextNumber (53-bit layout 41/0/12, start 0)",
      () => asNumbers.nextNumber(),
      COUNT,
      "a JS number; layout limit 4,096 ids per ms",
    ),
    measure(
      "@leaf/core nextId (same 53-bit layout, start 0)",
      () => asBigints.nextId(),
      "the bigint path on the same layout",
    ),
    measureNumber(
      "@leaf/core nextNumber (layouts.safe53ms, start 0)",
      () => safe.nextNumber(),
      Math.min(COUNT, 1_000_000),
      "layout limit 256 ids per ms (16 workers)",
    ),
  ];
}

/** flake-idgen with its overflow callback: past 4096 ids in a ms it answers in the next ms. */
function measureFlake(): Promise<BenchRow> {
  const gen = new FlakeId({ id: 1 });
  const ids = new BigInt64Array(COUNT);
  return new Promise((resolve) => {
    let i = 0;
    const start = performance.now();
    const step = () => {
      while (i < COUNT) {
        let sync = true;
        let got = false;
        gen.next((_err: Error | null, id: Buffer) => {
          ids[i++] = id.readBigInt64BE();
          got = true;
          if (!sync) step();
        });
        sync = false;
        if (!got) return;
      }
      resolve(
        row(
          "flake-idgen (overflow callback)",
          ids,
          performance.now() - start,
          "Buffer ids, read as bigint",
        ),
      );
    };
    step();
  });
}

const leaf = new SnowflakeGenerator({ workerId: 1 });
const rows: BenchRow[] = [
  measure("@leaf/core", () => leaf.nextId(), "Leaf random sequence start in [0,100)"),
  measureBatch("@leaf/core (batch of 1,000)", (n) => leaf.nextIds(n), 1000),
];
// A lease whose fenceAt is far ahead: the cost of the fence check, once per tick.
const leased = new SnowflakeGenerator({
  workerId: 4,
  lease: { fenceAt: performance.now() + 3_600_000 },
});
rows.push(
  measure("@leaf/core (lease with fenceAt)", () => leased.nextId(), "fenceAt read on every tick"),
  measureBatch("@leaf/core (lease, batch of 1,000)", (n) => leased.nextIds(n), 1000),
);
rows.push(
  await measureBatchAsync(
    "@leaf/core nextIdsAsync (batch of 100,000)",
    (n) => leased.nextIdsAsync(n),
    100_000,
    "a turn of the event loop every 4,096 ids",
  ),
);
const zeroStart = new SnowflakeGenerator({ workerId: 2, randomSequenceStart: 0 });
rows.push(
  measure(
    "@leaf/core (sequence start 0)",
    () => zeroStart.nextId(),
    "every tick from 0: 4,096 ids per ms",
  ),
);
rows.push(...numberRows());
const cached = new CachedSnowflakeGenerator(new SnowflakeGenerator({ workerId: 3 }));
cached.prefill();
rows.push(
  measure(
    "@leaf/core CachedSnowflakeGenerator",
    () => cached.nextId(),
    "ring buffer, refilled in the background",
  ),
);
cached.close();

const sapphire = new SapphireSnowflake(layouts.leaf.epoch);
rows.push(
  measure(
    "@sapphire/snowflake",
    () => sapphire.generate(),
    "no wait at 4,096 per ms: increment wraps",
  ),
);
const nodejs = new NodejsSnowflake({ instance_id: 1, custom_epoch: layouts.leaf.epoch });
rows.push(measure("nodejs-snowflake", () => nodejs.getUniqueID() as bigint, "WebAssembly"));
const snowy = new Snowyflake({ workerId: 1n, processId: 1n });
rows.push(measure("snowyflake", () => snowy.nextId() as bigint));
rows.push(await measureFlake());

report(
  "snowflake",
  rows,
  `${COUNT.toLocaleString("en-US")} ids per row, one process, Node ${process.version}. ` +
    `Layout limit for one worker (41/10/12): ${layouts.leaf.idsPerSecondPerWorker.toLocaleString("en-US")} ids/s; ` +
    "with Leaf's random start the most one generator can issue is about 4,046,500 ids/s.",
);
