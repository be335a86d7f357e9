// `pnpm bench http`: the Leaf server over HTTP, with wrk (Debian's package) as the load generator
// in a process of its own. Measured in interleaved rounds: the fastest id server Node allows (raw
// node:http, a bigint counter; bench/src/_raw-id-server.ts), a bare fastify route, the single-id
// Java paths, the batch paths, and the single-id paths served by 2 worker processes
// (`leaf-server --workers 2`). Each server runs in its own process; its CPU time (and its
// workers') is read from /proc before and after each run, and wrk's own CPU time after it exits.
// Every id wrk receives is counted for repeats (bench/src/_id-runs.ts), the raw server's too.
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { availableParallelism, loadavg, tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { freePort } from "@leaf/testkit";
import { IdRuns } from "./_id-runs";
import { type BenchRow, report } from "./_report";

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, "..", "..");
const WRK_SCRIPT = join(here, "wrk-summary.lua");
/** `pnpm bench http [--rounds N] [--seconds S]`: rounds and seconds per run (default 7 and 5). */
const ROUNDS = option("--rounds", 7);
const DURATION_S = option("--seconds", 5);
const WARMUP_S = 2;
const CONNECTIONS = 32;
const BATCH = 10_000;
const BATCH_CONNECTIONS = 4;
/**
 * Requests per write in the pipelined rows: wrk's cost per request falls (fewer system calls), so
 * on a machine where it shares the cores with the server the server gets more of them.
 */
const PIPELINE = 8;
const SEGMENT_PATH = "/api/segment/get/leaf-segment-test";
const SNOWFLAKE_PATH = "/api/snowflake/get/bench";
/**
 * With 2 cores or more, wrk runs on core 0 and each single-process server on core 1 (`taskset`),
 * so that the scheduler never puts a server and the load generator on one core for a while. The
 * server of 2 workers is not pinned: its workers have both cores, one of them shared with wrk, as
 * on any machine where the load comes from the same host. (Pinned runs still spread: a round's
 * ratio to raw node:http ranged from 0.73 to 1.28 in one run; unpinned, from 0.49 to 1.64.)
 */
const PINNED = availableParallelism() >= 2;
const LOAD_CORE = "0";
const SERVER_CORE = "1";
/** Clock ticks per second of /proc/PID/stat's utime and stime. */
const CLOCK_TICKS = Number(spawnSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).stdout) || 100;

function option(name: string, fallback: number): number {
  const at = process.argv.indexOf(name);
  if (at < 0) return fallback;
  const value = Number(process.argv[at + 1]);
  if (!Number.isInteger(value) || value < 1) {
    throw new Error(`${name} takes a whole number of at least 1, got "${process.argv[at + 1]}"`);
  }
  return value;
}

/** A server process under test. */
interface Server {
  name: string;
  process: ChildProcess;
}

/** One load: a URL of a server, with its connection count. */
interface Target {
  name: string;
  server: Server;
  url: string;
  connections: number;
  /** Ids in each answer (none for the constant route). */
  idsPerAnswer: number;
  /** Where the ids it answers are counted: one per server and id space (key), across targets. */
  ids?: IdRuns;
  /** Requests each connection sends in one write (HTTP pipelining; default 1). */
  pipeline?: number;
}

/** One wrk run against a target. */
interface Run {
  requestsPerSecond: number;
  p99Micros: number;
  /** CPU seconds the server (with its worker processes) used per million requests. */
  cpuSecondsPerMillion: number;
  /** CPU seconds wrk used per second of the run. */
  loadGeneratorCores: number;
  errors: number;
  /** Ids received and counted. */
  ids: number;
}

/** `command` and `args`, run on `cores` only (a `taskset` list) when given. */
function onCores(cores: string | undefined, command: string, args: string[]): [string, string[]] {
  return cores === undefined ? [command, args] : ["taskset", ["-c", cores, command, ...args]];
}

/**
 * Starts `args` with node (on `cores` when given) and resolves once a line of its output contains
 * `ready`.
 */
function startProcess(
  args: string[],
  env: Record<string, string>,
  ready: string,
  cwd: string,
  cores: string | undefined,
): Promise<ChildProcess> {
  return new Promise((resolve, reject) => {
    const child = spawn(...onCores(cores, process.execPath, args), {
      cwd,
      env: { ...process.env, ...env },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    let started = false;
    // Read all output while the server runs, so that it never blocks on a full pipe.
    const onData = (chunk: Buffer) => {
      if (started) return;
      out += chunk.toString();
      if (out.includes(ready)) {
        started = true;
        resolve(child);
      }
    };
    child.stdout!.on("data", onData);
    child.stderr!.on("data", onData);
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

/** CPU seconds (user + system) `pid` and every process under it have used so far. */
function cpuSeconds(pid: number): number {
  let ticks = 0;
  const visit = (id: number) => {
    let stat: string;
    try {
      stat = readFileSync(`/proc/${id}/stat`, "utf8");
    } catch {
      return; // exited in between
    }
    // Fields after the command name (which may hold spaces): utime and stime are the 12th and 13th.
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    ticks += Number(fields[11]) + Number(fields[12]);
    let children = "";
    try {
      children = readFileSync(`/proc/${id}/task/${id}/children`, "utf8");
    } catch {}
    for (const child of children.split(" ").filter(Boolean)) visit(Number(child));
  };
  visit(pid);
  return ticks / CLOCK_TICKS;
}

/** CPU seconds of this process's children that have exited (wrk, once it has). */
function exitedChildrenCpuSeconds(): number {
  const stat = readFileSync("/proc/self/stat", "utf8");
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  // cutime and cstime, the 16th and 17th fields.
  return (Number(fields[13]) + Number(fields[14])) / CLOCK_TICKS;
}

/** What wrk-summary.lua prints. */
interface WrkSummary {
  requests: number;
  durationMicros: number;
  p99Micros: number;
  socketErrors: number;
  non2xx: number;
}

/**
 * Runs wrk (one thread) against `url` for `seconds`, writing the answers' bodies to `idsFile`, with
 * `pipeline` requests per write.
 */
function wrk(
  url: string,
  connections: number,
  seconds: number,
  idsFile: string,
  pipeline = 1,
): Promise<WrkSummary> {
  return new Promise((resolve, reject) => {
    const child = spawn(
      ...onCores(PINNED ? LOAD_CORE : undefined, "wrk", [
        "-t1",
        `-c${connections}`,
        `-d${seconds}s`,
        "--timeout",
        "10s",
        "-s",
        WRK_SCRIPT,
        url,
      ]),
      { env: { ...process.env, WRK_IDS_FILE: idsFile, WRK_PIPELINE: String(pipeline) } },
    );
    let out = "";
    child.stdout.setEncoding("utf8").on("data", (chunk: string) => {
      out += chunk;
    });
    child.stderr.setEncoding("utf8").on("data", (chunk: string) => {
      out += chunk;
    });
    child.once("error", (error) =>
      reject(new Error(`wrk could not run (Debian: apt-get install wrk): ${error.message}`)),
    );
    child.once("exit", () => {
      const line = /^WRK (.*)$/m.exec(out);
      if (line === null) reject(new Error(`wrk printed no summary for ${url}:\n${out}`));
      else resolve(JSON.parse(line[1]!) as WrkSummary);
    });
  });
}

/** Where wrk writes the answers of the run under way (read and removed after each run). */
const idsDir = mkdtempSync(join(tmpdir(), "leaf-bench-http-ids-"));
/** The machine's load average (1 minute) as each round started. */
const roundLoads: number[] = [];
/** Ids each target received and counted, warm-up included. */
const idsReceived = new Map<Target, number>();

async function measure(target: Target, seconds: number): Promise<Run> {
  const pid = target.server.process.pid!;
  const idsFile = join(idsDir, "answers");
  rmSync(idsFile, { force: true });
  const before = cpuSeconds(pid);
  const wrkBefore = exitedChildrenCpuSeconds();
  const summary = await wrk(target.url, target.connections, seconds, idsFile, target.pipeline);
  const cpu = cpuSeconds(pid) - before;
  const wrkCpu = exitedChildrenCpuSeconds() - wrkBefore;
  const durationS = summary.durationMicros / 1e6;
  let ids = 0;
  if (target.ids !== undefined) {
    ids = existsSync(idsFile) ? target.ids.addFile(idsFile) : 0;
    const expected = (summary.requests - summary.non2xx) * target.idsPerAnswer;
    if (ids !== expected) {
      throw new Error(
        `${target.name}: wrk counted ${summary.requests - summary.non2xx} answers of ${target.idsPerAnswer} ids (${expected}), but ${ids} ids were written: the count of ids would not cover every answer`,
      );
    }
  }
  rmSync(idsFile, { force: true });
  idsReceived.set(target, (idsReceived.get(target) ?? 0) + ids);
  return {
    requestsPerSecond: summary.requests / durationS,
    p99Micros: summary.p99Micros,
    cpuSecondsPerMillion: (cpu * 1e6) / Math.max(1, summary.requests),
    loadGeneratorCores: wrkCpu / durationS,
    errors: summary.socketErrors + summary.non2xx,
    ids,
  };
}

/**
 * Warms every target up, then measures them ROUNDS times in turn, each round starting one target
 * further on, so that neither a burst of load from elsewhere on the machine nor the position in
 * the round favours one target. Returns each target's runs, round by round.
 */
async function measureAll(targets: Target[]): Promise<Run[][]> {
  for (const target of targets) await measure(target, WARMUP_S);
  const runs: Run[][] = targets.map(() => []);
  for (let round = 0; round < ROUNDS; round++) {
    roundLoads.push(loadavg()[0]!);
    for (let k = 0; k < targets.length; k++) {
      const i = (round + k) % targets.length;
      runs[i]![round] = await measure(targets[i]!, DURATION_S);
    }
  }
  return runs;
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

/** The median, lowest and highest of `runs[r] / base[r]` (each round's runs paired). */
function ratio(runs: Run[], base: Run[]): { median: number; low: number; high: number } {
  const ratios = runs.map((run, r) => run.requestsPerSecond / base[r]!.requestsPerSecond);
  return { median: median(ratios), low: Math.min(...ratios), high: Math.max(...ratios) };
}

/** Builds the server the way `pnpm start` does. */
function buildServer(): void {
  const r = spawnSync(
    "pnpm",
    ["exec", "turbo", "run", "build", "--filter=@leaf/server...", "--output-logs=errors-only"],
    { cwd: root, stdio: "inherit" },
  );
  if (r.status !== 0) throw new Error("building @leaf/server failed");
}

const round3 = (n: number) => Number(n.toFixed(3));

async function main(): Promise<void> {
  if (spawnSync("wrk", ["--version"]).error) {
    throw new Error(
      "wrk is not installed (Debian: apt-get install wrk; scripts/install-services.sh)",
    );
  }
  buildServer();
  const loadBefore = loadavg()[0]!;
  const dataDirs: string[] = [];
  const servers: Server[] = [];
  // The Leaf servers run in their data directory, the others in bench/ (where tsx resolves).
  // A single-process server on SERVER_CORE (PINNED), the server of 2 workers (`onEveryCore`) on
  // every core.
  const start = async (
    name: string,
    args: string[],
    ready: string,
    { cwd, onEveryCore = false }: { cwd?: string; onEveryCore?: boolean } = {},
  ) => {
    const cores = PINNED && !onEveryCore ? SERVER_CORE : undefined;
    const port = String(await freePort());
    const dataDir = mkdtempSync(join(tmpdir(), "leaf-bench-http-"));
    dataDirs.push(dataDir);
    const child = await startProcess(
      args,
      {
        PORT: port,
        LEAF_SERVER_PORT: port,
        LEAF_DATA_DIR: dataDir,
        LEAF_LOG_LEVEL: "warn",
        LEAF_SERVER_DRAIN_MS: "0",
      },
      ready,
      cwd ?? dataDir,
      cores,
    );
    const server = { name, process: child };
    servers.push(server);
    return { server, base: `http://127.0.0.1:${port}` };
  };
  const cli = join(root, "apps/server/dist/cli.js");
  const tsx = ["--import", "tsx"];
  let runs: Run[][];
  let targets: Target[];
  try {
    // Every server runs for the whole bench (an idle one costs nothing); only the one under load
    // works.
    const benchDir = join(root, "bench");
    const raw = await start("raw", [...tsx, join(here, "_raw-id-server.ts")], "raw ready", {
      cwd: benchDir,
    });
    const bare = await start(
      "bare",
      [...tsx, join(here, "_bare-fastify-server.ts")],
      "bare ready",
      { cwd: benchDir },
    );
    const leaf = await start("leaf", [cli], "Stop with Ctrl-C");
    const two = await start("leaf2", [cli, "--workers", "2"], "Stop with Ctrl-C", {
      onEveryCore: true,
    });
    const single = (
      name: string,
      server: { server: Server; base: string },
      path: string,
      ids: IdRuns | undefined,
    ): Target => ({
      name,
      server: server.server,
      url: `${server.base}${path}`,
      connections: CONNECTIONS,
      idsPerAnswer: 1,
      ids,
    });
    const batch = (
      name: string,
      server: { server: Server; base: string },
      path: string,
      ids: IdRuns,
    ): Target => ({
      ...single(name, server, `${path}?count=${BATCH}`, ids),
      connections: BATCH_CONNECTIONS,
      idsPerAnswer: BATCH,
    });
    // One count per server and id space: a key's single ids and batches come from the same ranges
    // (segment) or the same worker ids (snowflake), so they are counted together.
    const leafSegment = new IdRuns();
    const leafSnowflake = new IdRuns();
    const twoSegment = new IdRuns();
    const twoSnowflake = new IdRuns();
    const pipelined = (target: Target): Target => ({
      ...target,
      name: `${target.name}, pipelined`,
      pipeline: PIPELINE,
    });
    targets = [
      single("raw", raw, "/", new IdRuns()),
      single("bare", bare, "/", undefined),
      single("segment", leaf, SEGMENT_PATH, leafSegment),
      single("snowflake", leaf, SNOWFLAKE_PATH, leafSnowflake),
      single("segment, 2 workers", two, SEGMENT_PATH, twoSegment),
      single("snowflake, 2 workers", two, SNOWFLAKE_PATH, twoSnowflake),
      pipelined(single("segment", leaf, SEGMENT_PATH, leafSegment)),
      pipelined(single("snowflake", leaf, SNOWFLAKE_PATH, leafSnowflake)),
      pipelined(single("segment, 2 workers", two, SEGMENT_PATH, twoSegment)),
      pipelined(single("snowflake, 2 workers", two, SNOWFLAKE_PATH, twoSnowflake)),
      batch("segment batch", leaf, SEGMENT_PATH, leafSegment),
      batch("snowflake batch", leaf, SNOWFLAKE_PATH, leafSnowflake),
    ];
    runs = await measureAll(targets);
  } finally {
    for (const server of servers) await stop(server.process);
    for (const dir of dataDirs) rmSync(dir, { recursive: true, force: true });
    rmSync(idsDir, { recursive: true, force: true });
  }
  const loadAfter = loadavg()[0]!;
  const byName = (name: string) => runs[targets.findIndex((t) => t.name === name)]!;
  // Ids counted per server and id space (each count shared by the targets that feed it).
  const counts = new Map<IdRuns, ReturnType<IdRuns["count"]>>();
  for (const target of targets) {
    if (target.ids !== undefined && !counts.has(target.ids))
      counts.set(target.ids, target.ids.count());
  }
  const targetOf = (name: string) => targets.find((t) => t.name === name)!;
  const countOf = (name: string) => {
    const ids = targetOf(name).ids;
    return ids === undefined ? undefined : counts.get(ids)!;
  };
  const rawRuns = byName("raw");

  const row = (
    name: string,
    target: string,
    options: { idsPerRequest?: number; versus?: { runs: Run[]; column: string } } = {},
  ): BenchRow => {
    const mine = byName(target);
    const rps = median(mine.map((r) => r.requestsPerSecond));
    const cpu = median(mine.map((r) => r.cpuSecondsPerMillion));
    const versus =
      target === "raw" ? undefined : options.versus && ratio(mine, options.versus.runs);
    const column = (name: string) =>
      versus && options.versus?.column === name ? round3(versus.median) : null;
    return {
      name,
      requestsPerSecond: Math.round(rps),
      p99Micros: Math.round(median(mine.map((r) => r.p99Micros))),
      ratioToRawNode: target === "raw" ? 1 : column("ratioToRawNode"),
      ratioToOneWorker: column("ratioToOneWorker"),
      ratioRange: versus ? `${versus.low.toFixed(2)}-${versus.high.toFixed(2)}` : null,
      idsPerSecond: options.idsPerRequest ? Math.round(rps * options.idsPerRequest) : null,
      cpuSecondsPerMillionRequests: Number(cpu.toFixed(1)),
      // Requests per second of one core's worth of the server's CPU time.
      requestsPerCoreSecond: Math.round(1e6 / cpu),
      loadGeneratorCores: Number(median(mine.map((r) => r.loadGeneratorCores)).toFixed(2)),
      errors: mine.reduce((n, r) => n + r.errors, 0),
      idsCounted: targetOf(target).ids === undefined ? null : idsReceived.get(targetOf(target))!,
      duplicates: countOf(target)?.duplicates ?? null,
    };
  };
  const toRaw = { runs: rawRuns, column: "ratioToRawNode" };
  const rows: BenchRow[] = [
    row("raw node:http (bigint counter, plain text)", "raw"),
    row("bare fastify route (constant)", "bare", { versus: toRaw }),
    row("GET /api/segment/get/:key", "segment", { versus: toRaw, idsPerRequest: 1 }),
    row("GET /api/snowflake/get/:key", "snowflake", { versus: toRaw, idsPerRequest: 1 }),
    row("GET /api/segment/get/:key, --workers 2", "segment, 2 workers", {
      versus: { runs: byName("segment"), column: "ratioToOneWorker" },
      idsPerRequest: 1,
    }),
    row("GET /api/snowflake/get/:key, --workers 2", "snowflake, 2 workers", {
      versus: { runs: byName("snowflake"), column: "ratioToOneWorker" },
      idsPerRequest: 1,
    }),
    row(`GET /api/segment/get/:key, ${PIPELINE} pipelined`, "segment, pipelined", {
      idsPerRequest: 1,
    }),
    row(`GET /api/snowflake/get/:key, ${PIPELINE} pipelined`, "snowflake, pipelined", {
      idsPerRequest: 1,
    }),
    row(
      `GET /api/segment/get/:key, --workers 2, ${PIPELINE} pipelined`,
      "segment, 2 workers, pipelined",
      {
        versus: { runs: byName("segment, pipelined"), column: "ratioToOneWorker" },
        idsPerRequest: 1,
      },
    ),
    row(
      `GET /api/snowflake/get/:key, --workers 2, ${PIPELINE} pipelined`,
      "snowflake, 2 workers, pipelined",
      {
        versus: { runs: byName("snowflake, pipelined"), column: "ratioToOneWorker" },
        idsPerRequest: 1,
      },
    ),
    row(`GET /api/segment/get/:key?count=${BATCH}`, "segment batch", { idsPerRequest: BATCH }),
    row(`GET /api/snowflake/get/:key?count=${BATCH}`, "snowflake batch", { idsPerRequest: BATCH }),
  ];

  const ratioOf = (name: string, base: string) => ratio(byName(name), byName(base)).median;
  const p99Of = (name: string) => median(byName(name).map((r) => r.p99Micros));
  const single = Math.min(ratioOf("segment", "raw"), ratioOf("snowflake", "raw"));
  const workers = Math.min(
    ratioOf("segment, 2 workers", "segment"),
    ratioOf("snowflake, 2 workers", "snowflake"),
  );
  const p99Kept =
    p99Of("segment, 2 workers") <= p99Of("segment") &&
    p99Of("snowflake, 2 workers") <= p99Of("snowflake");
  const workersPipelined = Math.min(
    ratioOf("segment, 2 workers, pipelined", "segment, pipelined"),
    ratioOf("snowflake, 2 workers, pipelined", "snowflake, pipelined"),
  );
  const p99KeptPipelined =
    p99Of("segment, 2 workers, pipelined") <= p99Of("segment, pipelined") &&
    p99Of("snowflake, 2 workers, pipelined") <= p99Of("snowflake, pipelined");
  const batch =
    Math.min(
      ...["segment batch", "snowflake batch"].map((n) =>
        median(byName(n).map((r) => r.requestsPerSecond)),
      ),
    ) * BATCH;
  // Requests per core-second of the server with 2 workers, against one worker (both paths).
  const cpuOf = (name: string) => median(byName(name).map((r) => r.cpuSecondsPerMillion));
  const efficiency =
    (cpuOf("segment") + cpuOf("snowflake")) /
    (cpuOf("segment, 2 workers") + cpuOf("snowflake, 2 workers"));
  const met = (ok: boolean) => (ok ? "met" : "NOT met");
  const allCounts = [...counts.values()];
  const counted = allCounts.reduce((n, c) => n + c.total, 0);
  const repeated = allCounts.reduce((n, c) => n + c.duplicates, 0);
  const examples = allCounts.flatMap((c) => (c.example === undefined ? [] : [c.example]));
  if (repeated > 0) process.exitCode = 1;
  report(
    "http",
    rows,
    `wrk (one thread, its own process), ${CONNECTIONS} connections (${BATCH_CONNECTIONS} for batches); ${ROUNDS} interleaved rounds × ${DURATION_S} s after ${WARMUP_S} s of warm-up; ` +
      "medians over the rounds; a ratio is the median of each round's ratio (ratioRange: lowest-highest). " +
      "Each server in its own process, the Leaf server as `pnpm start` runs it (embedded store, local registry, log level warn); " +
      (PINNED
        ? `wrk on core ${LOAD_CORE}, each single-process server on core ${SERVER_CORE} (taskset), the server of 2 workers on every core; `
        : "") +
      `CPU time (user + system, workers included) from /proc; requestsPerCoreSecond is requests per CPU second of the server, loadGeneratorCores wrk's CPU seconds per second. Load average ${loadBefore.toFixed(1)} before, ${loadAfter.toFixed(1)} after (${Math.min(...roundLoads).toFixed(1)}-${Math.max(...roundLoads).toFixed(1)} as the rounds started; ${availableParallelism()} cores).\n` +
      `Ids counted (every answer, warm-up included; duplicates is per server and id space, a key's single ids and batches together): ${counted.toLocaleString("en-US")}, ` +
      (repeated === 0
        ? "none twice.\n"
        : `${repeated.toLocaleString("en-US")} REPEATED (for example ${examples.join(", ")}).\n`) +
      `Targets: single-id paths ≥ 0.9 of raw node:http: ${single.toFixed(3)} (${met(single >= 0.9)}); ` +
      `2 workers ≥ 1.3× one worker: ${workers.toFixed(2)} (${met(workers >= 1.3)}), p99 no worse: ${met(p99Kept)}, per-core efficiency ${efficiency.toFixed(2)} of one worker's; ` +
      `with ${PIPELINE} requests pipelined (p99 of each group of ${PIPELINE}): ${workersPipelined.toFixed(2)} (${met(workersPipelined >= 1.3)}), p99 no worse: ${met(p99KeptPipelined)}; ` +
      `batch ≥ 2,000,000 ids/s: ${Math.round(batch).toLocaleString("en-US")} (${met(batch >= 2_000_000)}).`,
  );
}

await main();
