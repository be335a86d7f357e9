// `pnpm bench http`: the Leaf server over HTTP. autocannon (in this process) against a server in
// another process: the single-id snowflake and segment endpoints beside a bare fastify route that
// returns a constant (same fastify, same payload size), then ids per second through the batch
// endpoints. The server runs as `pnpm start` runs it: apps/server/dist/cli.js, embedded defaults.
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { freePort } from "@leaf/testkit";
import { type BenchRow, report } from "./_report";

/** The part of autocannon's result this bench reads (autocannon ships no types). */
interface AutocannonResult {
  requests: { average: number };
  latency: { p99: number };
  throughput: { average: number };
  errors: number;
  timeouts: number;
  non2xx: number;
}
const autocannon = createRequire(import.meta.url)("autocannon") as (options: {
  url: string;
  connections: number;
  duration: number;
  pipelining: number;
}) => Promise<AutocannonResult>;

const root = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
const ROUNDS = 3;
const DURATION_S = 8;
const WARMUP_S = 3;
const CONNECTIONS = 32;
const BATCH = 10_000;
const BATCH_CONNECTIONS = 4;

interface Measured {
  requestsPerSecond: number;
  p99Millis: number;
  errors: number;
  non2xx: number;
  bytesPerSecond: number;
}

/** Builds the server the way `pnpm start` does. */
function buildServer(): void {
  const r = spawnSync(
    "pnpm",
    ["exec", "turbo", "run", "build", "--filter=@leaf/server...", "--output-logs=errors-only"],
    {
      cwd: root,
      stdio: "inherit",
    },
  );
  if (r.status !== 0) throw new Error("building @leaf/server failed");
}

/** Starts `args` with node and resolves once a line of its output contains `ready`. */
function startProcess(
  args: string[],
  env: Record<string, string>,
  ready: string,
  cwd: string,
): Promise<ChildProcess> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, args, {
      cwd,
      env: { ...process.env, ...env },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    const onData = (chunk: Buffer) => {
      out += chunk.toString();
      if (out.includes(ready)) resolve(child);
    };
    child.stdout!.on("data", onData);
    child.stderr!.on("data", (chunk: Buffer) => {
      out += chunk.toString();
    });
    child.once("exit", (code) =>
      reject(new Error(`${args.join(" ")} exited with ${code}:\n${out}`)),
    );
  });
}

async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null) return;
  const exited = new Promise((resolve) => child.once("exit", resolve));
  child.kill("SIGTERM");
  await exited;
}

async function load(url: string, connections: number, duration: number): Promise<Measured> {
  const result = await autocannon({ url, connections, duration, pipelining: 1 });
  return {
    requestsPerSecond: result.requests.average,
    p99Millis: result.latency.p99,
    errors: result.errors + result.timeouts,
    non2xx: result.non2xx,
    bytesPerSecond: result.throughput.average,
  };
}

/** The better of two measurements (by requests per second). */
function better(a: Measured | undefined, b: Measured): Measured {
  return !a || b.requestsPerSecond > a.requestsPerSecond ? b : a;
}

/**
 * Warms every target up, then measures them in turn, ROUNDS times, keeping each one's best: a
 * round-robin, so that a burst of load from elsewhere on the machine does not favour one target.
 */
async function measureAll(
  targets: Array<{ url: string; connections: number }>,
): Promise<Measured[]> {
  for (const t of targets) await load(t.url, t.connections, WARMUP_S);
  const best: Array<Measured | undefined> = targets.map(() => undefined);
  for (let round = 0; round < ROUNDS; round++) {
    for (const [i, t] of targets.entries())
      best[i] = better(best[i], await load(t.url, t.connections, DURATION_S));
  }
  return best as Measured[];
}

const BARE_SCRIPT = `
import Fastify from "fastify";
const app = Fastify();
// A constant of an id's length, answered like the id endpoints answer (plain text).
app.get("/", (request, reply) => { reply.send("1256557484213448722"); });
await app.listen({ host: "127.0.0.1", port: Number(process.env.PORT) });
console.log("bare ready");
`;

async function main(): Promise<void> {
  buildServer();
  const dataDir = mkdtempSync(join(tmpdir(), "leaf-bench-http-"));
  const rows: BenchRow[] = [];
  try {
    // Both servers run at once (an idle one costs nothing); only the one under load works.
    const barePort = await freePort();
    const bare = await startProcess(
      ["--input-type=module", "-e", BARE_SCRIPT],
      { PORT: String(barePort) },
      "bare ready",
      join(root, "bench"),
    );
    const port = await freePort();
    let server: ChildProcess | undefined;
    let results: Measured[];
    try {
      server = await startProcess(
        [join(root, "apps/server/dist/cli.js")],
        { LEAF_SERVER_PORT: String(port), LEAF_DATA_DIR: dataDir, LEAF_LOG_LEVEL: "warn" },
        "Stop with Ctrl-C",
        dataDir,
      );
      const base = `http://127.0.0.1:${port}`;
      results = await measureAll([
        { url: `http://127.0.0.1:${barePort}/`, connections: CONNECTIONS },
        { url: `${base}/api/snowflake/get/bench`, connections: CONNECTIONS },
        { url: `${base}/api/segment/get/leaf-segment-test`, connections: CONNECTIONS },
        { url: `${base}/api/snowflake/get/bench?count=${BATCH}`, connections: BATCH_CONNECTIONS },
        {
          url: `${base}/api/segment/get/leaf-segment-test?count=${BATCH}`,
          connections: BATCH_CONNECTIONS,
        },
      ]);
    } finally {
      await stop(bare);
      if (server) await stop(server);
    }
    const [bareResult, snowflake, segment, batchSnowflake, batchSegment] = results as [
      Measured,
      Measured,
      Measured,
      Measured,
      Measured,
    ];

    const row = (name: string, m: Measured, idsPerRequest: number, ratio: boolean): BenchRow => ({
      name,
      requestsPerSecond: Math.round(m.requestsPerSecond),
      p99Millis: m.p99Millis,
      ratioToBare: ratio
        ? Number((m.requestsPerSecond / bareResult.requestsPerSecond).toFixed(3))
        : null,
      idsPerSecond: idsPerRequest === 0 ? null : Math.round(m.requestsPerSecond * idsPerRequest),
      megabytesPerSecond: Number((m.bytesPerSecond / 1e6).toFixed(1)),
      errors: m.errors + m.non2xx,
    });
    rows.push(row("bare fastify route (constant)", bareResult, 0, true));
    rows.push(row("GET /api/snowflake/get/:key", snowflake, 1, true));
    rows.push(row("GET /api/segment/get/:key", segment, 1, true));
    rows.push(row(`GET /api/snowflake/get/:key?count=${BATCH}`, batchSnowflake, BATCH, false));
    rows.push(row(`GET /api/segment/get/:key?count=${BATCH}`, batchSegment, BATCH, false));

    const single =
      Math.min(snowflake.requestsPerSecond, segment.requestsPerSecond) /
      bareResult.requestsPerSecond;
    const batch =
      Math.min(batchSnowflake.requestsPerSecond, batchSegment.requestsPerSecond) * BATCH;
    report(
      "http",
      rows,
      `autocannon in this process, ${CONNECTIONS} connections (${BATCH_CONNECTIONS} for batches), best of ${ROUNDS} rounds (round-robin over the targets) × ${DURATION_S} s after ${WARMUP_S} s of warm-up; ` +
        "each server in its own process (the Leaf server as `pnpm start` runs it: embedded store, local registry, log level warn).\n" +
        `Targets: single-id endpoints ≥ 0.85 of the bare route: ${single.toFixed(3)} (${single >= 0.85 ? "met" : "NOT met"}); ` +
        `batch ≥ 2,000,000 ids/s: ${Math.round(batch).toLocaleString("en-US")} (${batch >= 2_000_000 ? "met" : "NOT met"}).`,
    );
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
}

await main();
