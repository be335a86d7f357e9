// `pnpm bench redis-sequence`: ids per second for one shard from one process against a private
// Redis, in a tight loop, beside the layout's limit of 2^19 = 524,288 ids per second per shard.
// Each row runs over whole seconds (a second's sequence space is the cap, so a partial second
// would flatter the rate); clientIdsPerSecond is the rate while not waiting for the next second.
import { RedisSequence } from "@leaf/redis-sequence";
import { startRedis } from "@leaf/testkit";
import { type BenchRow, report } from "./_report";

const SECONDS = Number(process.env.BENCH_SECONDS ?? 5);
const SHARD = 0;

type Loop = (seq: RedisSequence, until: number, tick: (n: number) => void) => Promise<void>;

const loops: Record<string, Loop> = {
  async nextId(seq, until, tick) {
    while (Date.now() < until) {
      await seq.nextId(SHARD);
      tick(1);
    }
  },
  async tryNextIdSync(seq, until, tick) {
    while (Date.now() < until) {
      if (seq.tryNextIdSync(SHARD) === undefined) await seq.nextId(SHARD);
      tick(1);
    }
  },
  async nextIds100(seq, until, tick) {
    while (Date.now() < until) {
      await seq.nextIds(SHARD, 100);
      tick(100);
    }
  },
};

interface Case {
  name: string;
  loop: keyof typeof loops;
  batchSize: number;
  timeSource?: "application" | "redis";
}

const cases: Case[] = [
  { name: "await nextId(shard), batch 1000", loop: "nextId", batchSize: 1000 },
  { name: "await nextId(shard), batch 10000", loop: "nextId", batchSize: 10_000 },
  { name: "tryNextIdSync(shard), batch 1000", loop: "tryNextIdSync", batchSize: 1000 },
  { name: "await nextIds(shard, 100), batch 10000", loop: "nextIds100", batchSize: 10_000 },
  {
    name: "await nextId(shard), batch 1000, Redis TIME",
    loop: "nextId",
    batchSize: 1000,
    timeSource: "redis",
  },
];

const redis = await startRedis();
const rows: BenchRow[] = [];
try {
  for (const [index, c] of cases.entries()) {
    const seq = new RedisSequence({
      url: redis.url,
      namespace: `bench-${process.pid}-${index}`,
      batchSize: c.batchSize,
      minBatchSize: c.batchSize,
      timeSource: c.timeSource ?? "application",
      onWarning: (w) => console.warn(w.message),
    });
    await seq.start();
    try {
      await seq.nextId(SHARD); // waits out the new namespace's fence
      // Start on a second boundary and stop on one.
      const start = (Math.floor(Date.now() / 1000) + 1) * 1000;
      while (Date.now() < start) await new Promise((r) => setTimeout(r, 1));
      const until = start + SECONDS * 1000;
      const before = seq.state().stats;
      let ids = 0;
      let busyMs = 0;
      let last = performance.now();
      await loops[c.loop]!(seq, until, (n) => {
        ids += n;
        const now = performance.now();
        // A call that took over 2 ms waited for the next second: not client work.
        if (now - last < 2) busyMs += now - last;
        last = now;
      });
      const elapsed = (Date.now() - start) / 1000;
      const after = seq.state();
      const limit = seq.layout.idsPerSecondPerWorker;
      const idsPerSecond = Math.round(ids / elapsed);
      rows.push({
        name: c.name,
        seconds: Number(elapsed.toFixed(2)),
        ids,
        idsPerSecond,
        limitIdsPerSecond: limit,
        ratioToLimit: Number((idsPerSecond / limit).toFixed(4)),
        roundTripsPer1000Ids: Number(
          (((after.stats.roundTrips - before.roundTrips) / ids) * 1000).toFixed(3),
        ),
        clientIdsPerSecond: Math.round(ids / (busyMs / 1000)),
        lastRoundTripMicros: after.redis.lastRoundTripMicros ?? null,
      });
    } finally {
      await seq.close();
    }
  }
} finally {
  await redis.dispose();
}

report(
  "redis-sequence",
  rows,
  `One process, one shard, ${SECONDS} whole seconds per row, private redis-server on loopback ` +
    "(no persistence). limitIdsPerSecond is the layout's 2^19 sequences per second per shard: a " +
    "second's space is used up in a fraction of it and the loop then waits for the next second. " +
    "clientIdsPerSecond is the rate while not waiting, i.e. the headroom above the limit.",
);
