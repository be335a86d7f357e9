// `pnpm bench client`: @leaf/client. Two Leaf server processes on one private MariaDB (the test
// kit's); the client's nextIdSync from its local cache beside the in-process segment generator's
// sync path (same run, same loop shape), ids per second end to end through both servers with
// adaptive ranges from a cold start, and the latency of nextId() across range refills.
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { performance } from "node:perf_hooks";
import { isLeafClientError, LeafClient, type SegmentIds } from "@leaf/client";
import { MemorySegmentStore, SegmentIdGenerator } from "@leaf/segment";
import { freePort, startMysql, stopAll } from "@leaf/testkit";
import { type BenchRow, report } from "./_report";

const ROUNDS = 5;
/** Ids per measured sync run. */
const SYNC_IDS = 20_000_000;
/** Ids drawn between two event-loop turns, so that background refills can complete. */
const CHUNK = 100_000;
/** The int column's maximum: a server's range of this tag lasts minutes at the rates measured. */
const HUGE_STEP = 2_147_483_647;
/** Seconds of the end-to-end run (from a cold client: the range size adapts during it). */
const END_TO_END_S = 5;
/** Calls timed one by one for the latency row. */
const LATENCY_CALLS = 2_000_000;
const ADMIN = "bench-client-admin-token";

const CLI = join(
  dirname(createRequire(import.meta.url).resolve("@leaf/server/package.json")),
  "dist",
  "cli.js",
);
const yieldToLoop = () => new Promise<void>((resolve) => setImmediate(resolve));
let sinkBig = 0n;

/** Starts one server process; resolves once /health/ready answers. */
async function startServer(
  label: string,
  dir: string,
  mysqlUrl: string,
): Promise<{ url: string; child: ChildProcess }> {
  const port = await freePort();
  const config = join(dir, `${label}.json`);
  writeFileSync(
    config,
    JSON.stringify({
      dataDir: join(dir, `${label}-data`),
      log: { level: "warn" },
      server: { host: "127.0.0.1", port, drainMs: 0, adminToken: ADMIN },
      segment: {
        store: "mysql",
        mysql: { url: mysqlUrl, password: "", createTable: true },
        demoTag: "",
      },
      snowflake: { enabled: false },
    }),
  );
  const child = spawn(process.execPath, [CLI, "--config", config], {
    stdio: ["ignore", "inherit", "inherit"],
  });
  const url = `http://127.0.0.1:${port}`;
  for (const deadline = performance.now() + 90_000; performance.now() < deadline; ) {
    if (child.exitCode !== null) throw new Error(`server ${label} exited at start`);
    try {
      const res = await fetch(`${url}/health/ready`);
      await res.arrayBuffer();
      if (res.status === 200) return { url, child };
    } catch {
      // Not listening yet.
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`server ${label} not ready in 90 s`);
}

async function createTag(url: string, tag: string, step: number): Promise<void> {
  const res = await fetch(`${url}/api/v1/admin/tags`, {
    method: "POST",
    headers: { authorization: `Bearer ${ADMIN}`, "content-type": "application/json" },
    body: JSON.stringify({ tag, step }),
  });
  if (res.status !== 201) throw new Error(`creating tag ${tag}: ${res.status} ${await res.text()}`);
}

async function generatorSync(generator: SegmentIdGenerator): Promise<number> {
  let last = 0n;
  const started = performance.now();
  for (let done = 0; done < SYNC_IDS; done += CHUNK) {
    for (let i = 0; i < CHUNK; i++) last = generator.nextIdSync("bench");
    await yieldToLoop();
  }
  sinkBig ^= last;
  return SYNC_IDS / ((performance.now() - started) / 1000);
}

/** The client's sync path; an empty cache (none expected: refills run between chunks) waits. */
async function clientSync(ids: SegmentIds): Promise<{ rate: number; empty: number }> {
  let last = 0n;
  let empty = 0;
  const started = performance.now();
  for (let done = 0; done < SYNC_IDS; done += CHUNK) {
    for (let i = 0; i < CHUNK; i++) {
      try {
        last = ids.nextIdSync();
      } catch (error) {
        if (!isLeafClientError(error, "CACHE_EMPTY")) throw error;
        empty++;
        last = await ids.nextId();
      }
    }
    await yieldToLoop();
  }
  sinkBig ^= last;
  return { rate: SYNC_IDS / ((performance.now() - started) / 1000), empty };
}

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), "leaf-bench-client-"));
  const children: ChildProcess[] = [];
  const rows: BenchRow[] = [];
  try {
    const mysql = await startMysql({ useEnv: false });
    const database = await mysql.createDatabase("leaf_bench_client");
    const a = await startServer("a", dir, mysql.urlFor(database));
    children.push(a.child);
    await createTag(a.url, "cache", HUGE_STEP);
    await createTag(a.url, "e2e", 1_000_000);
    await createTag(a.url, "e2e-awaited", 1_000_000);
    await createTag(a.url, "latency", 1_000_000);
    // Started after the tags exist: it reads the tag list at start.
    const b = await startServer("b", dir, mysql.urlFor(database));
    children.push(b.child);
    const servers = [a.url, b.url];

    // 1. nextIdSync from the local cache vs the in-process generator's sync path, alternating.
    const store = new MemorySegmentStore();
    await store.createTag({ tag: "bench", step: HUGE_STEP });
    const generator = new SegmentIdGenerator({ store });
    await generator.start();
    const cacheClient = new LeafClient({ servers });
    const cache = cacheClient.segment("cache", {
      minRangeSize: 1_000_000_000,
      maxRangeSize: HUGE_STEP,
      refillThreshold: 0.5,
    });
    await cache.start();
    await generatorSync(generator);
    await clientSync(cache);
    let generatorBest = 0;
    let clientBest = 0;
    let empty = 0;
    for (let round = 0; round < ROUNDS; round++) {
      generatorBest = Math.max(generatorBest, await generatorSync(generator));
      const measured = await clientSync(cache);
      clientBest = Math.max(clientBest, measured.rate);
      empty += measured.empty;
    }
    const handed = cache.stats().handedOut;
    const expected = BigInt(SYNC_IDS * (ROUNDS + 1));
    if (handed !== expected)
      throw new Error(`the client handed out ${handed} ids, not ${expected}`);
    rows.push({
      name: "client nextIdSync from the local cache (sync)",
      idsPerSecond: Math.round(clientBest),
      vsGenerator: Number((clientBest / generatorBest).toFixed(2)),
      cacheEmptyCalls: empty,
    });
    rows.push({
      name: "segment generator in process, nextIdSync (memory store; reference for the row above)",
      idsPerSecond: Math.round(generatorBest),
      vsGenerator: 1,
    });
    await cacheClient.close();
    await generator.close();

    // 2. End to end through both servers from a cold client: adaptive ranges (defaults but the
    //    largest range). First as a caller on the sync path takes them (nextIdSync, awaiting
    //    nextId() when the cache is empty), then with nextId() awaited for every id.
    for (const mode of ["sync", "awaited"] as const) {
      const e2eClient = new LeafClient({ servers });
      const e2e = e2eClient.segment(mode === "sync" ? "e2e" : "e2e-awaited", {
        maxRangeSize: 50_000_000,
      });
      let n = 0;
      let waits = 0;
      let last = 0n;
      const started = performance.now();
      const until = started + END_TO_END_S * 1000;
      while (performance.now() < until) {
        if (mode === "sync") {
          for (let i = 0; i < CHUNK; i++) {
            try {
              last = e2e.nextIdSync();
            } catch (error) {
              if (!isLeafClientError(error, "CACHE_EMPTY")) throw error;
              waits++;
              last = await e2e.nextId();
            }
          }
        } else {
          for (let i = 0; i < CHUNK; i++) last = await e2e.nextId();
        }
        n += CHUNK;
        await yieldToLoop();
      }
      const seconds = (performance.now() - started) / 1000;
      sinkBig ^= last;
      const stats = e2e.stats();
      if (stats.handedOut !== BigInt(n))
        throw new Error(`handed out ${stats.handedOut}, counted ${n}`);
      const health = e2eClient.servers();
      rows.push({
        name:
          mode === "sync"
            ? "client end to end through two servers, nextIdSync (adaptive ranges, cold start)"
            : "client end to end through two servers, await nextId() per id (adaptive ranges, cold start)",
        idsPerSecond: Math.round(n / seconds),
        cacheEmptyCalls: waits,
        ranges: stats.ranges,
        finalRangeSize: stats.rangeSize,
        requestsServerA: health[0]!.successes,
        requestsServerB: health[1]!.successes,
      });
      await e2eClient.close();
    }

    // 3. Latency of nextId() across refills: small ranges (0.02 s of ids) so that a refill comes
    //    every few thousand calls; every call timed.
    const latencyClient = new LeafClient({ servers });
    const lat = latencyClient.segment("latency", {
      targetSeconds: 0.02,
      minRangeSize: 1000,
      maxRangeSize: 200_000,
    });
    await lat.start();
    const times = new Float64Array(LATENCY_CALLS);
    const latStarted = performance.now();
    for (let done = 0; done < LATENCY_CALLS; done += 1000) {
      for (let i = 0; i < 1000; i++) {
        const t0 = performance.now();
        const id = await lat.nextId();
        times[done + i] = performance.now() - t0;
        sinkBig ^= id;
      }
      await yieldToLoop();
    }
    const latSeconds = (performance.now() - latStarted) / 1000;
    times.sort();
    const at = (q: number) =>
      times[Math.min(times.length - 1, Math.floor(q * times.length))]! * 1000;
    const latStats = lat.stats();
    rows.push({
      name: "client nextId() latency across range refills (~0.02 s ranges)",
      idsPerSecond: Math.round(LATENCY_CALLS / latSeconds),
      ranges: latStats.ranges,
      p50Micros: Number(at(0.5).toFixed(2)),
      p99Micros: Number(at(0.99).toFixed(2)),
      p999Micros: Number(at(0.999).toFixed(2)),
      maxMicros: Number(at(1).toFixed(1)),
    });
    await latencyClient.close();
  } finally {
    for (const child of children) {
      if (child.exitCode === null) {
        const exited = new Promise((resolve) => child.once("exit", resolve));
        child.kill("SIGTERM");
        await exited;
      }
    }
    await stopAll();
    rmSync(dir, { recursive: true, force: true });
  }
  report(
    "client",
    rows,
    "Goals (issue #16): the sync row >= 50,000,000 ids/s and within 1.5x of the generator's sync path; the server row > 10,000,000 ids/s.",
  );
  if (sinkBig === -1n) console.log("");
}

await main();
