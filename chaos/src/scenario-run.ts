// What one scenario works with while it runs: its server processes, the load, phases whose counters
// are kept, the servers' lease states polled from /api/v1/monitor, and the behaviour checks. At the
// end it stops everything and checks every id: no duplicate, every id decodes, increases per
// process.
import { rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type Layout, layouts } from "@leaf/core";
import { FakeClock } from "@leaf/testkit";
import { httpGet, keepAliveAgent, NoAnswer } from "./http-get";
import { IdRecorder, type SpaceSummary } from "./id-recorder";
import { LeafProcess, type LeafProcessOptions, serverCli } from "./leaf-process";
import {
  type LoadDriver as Driver,
  errorCode,
  LoadDriver,
  type LoopCounters,
  type LoopReport,
  type LoopTarget,
} from "./load-driver";
import type { Services } from "./services";

/** Where a segment tag's max id is read at the end (a database, a server's admin API). */
export interface MaxIdSource {
  maxId(tag: string): Promise<bigint>;
}

/** Context shared by every scenario of a run. */
export interface RunContext {
  services: Services;
  /** Folder for this run's files (configs, data folders, logs). */
  dir: string;
  /** libfaketime's path, when installed. */
  libfaketime: string | undefined;
  /** Progress lines (stderr). */
  log(line: string): void;
}

/** A behaviour check: what a user relies on, and whether it held. */
export interface Check {
  ok: boolean;
  text: string;
}

/** Counters of one phase of a scenario (a fault, its recovery). */
export interface PhaseReport {
  name: string;
  fromMs: number;
  toMs: number;
  /** Ids and errors per loop during the phase. */
  loops: Array<{ label: string; ids: number; errors: Record<string, number> }>;
}

/** One change in a server's lease or redis state, from /api/v1/monitor. */
export interface StateChange {
  atMs: number;
  server: string;
  what: string;
}

/** How a space's ids were checked by decoding them. */
export interface SpaceCheck extends SpaceSummary {
  /** Ids that do not decode as this mode's ids should (see `decodeRule`). */
  undecodable: number;
  undecodableExamples: string[];
  /** What "decodes" meant for this space. */
  decodeRule: string;
  /** Ids compared with the server's own decode endpoint, and how many disagreed. */
  serverDecodeSample: number;
  serverDecodeMismatches: number;
}

/** How to judge the ids of one space. */
type SpaceRule =
  | { mode: "segment"; database: MaxIdSource; tag: string }
  | { mode: "snowflake"; servers: LeafProcess[]; layout: Layout }
  | { mode: "redisSequence"; shards: Set<number> };

const SNOWFLAKE_SLACK_BEFORE_MS = 10_000;
const TIME_SLACK_AFTER_MS = 5_000;

/** A running scenario. */
export class ScenarioRun {
  readonly recorder = new IdRecorder();
  readonly servers: LeafProcess[] = [];
  readonly phases: PhaseReport[] = [];
  readonly checks: Check[] = [];
  readonly notes: string[] = [];
  readonly changes: StateChange[] = [];
  private driver: Driver | undefined;
  private readonly rules = new Map<string, SpaceRule>();
  private readonly workerIds = new Map<LeafProcess, Set<number>>();
  private readonly lastState = new Map<LeafProcess, string>();
  private readonly cleanups: Array<() => Promise<void> | void> = [];
  private readonly startedAtWall = Date.now();
  private readonly t0 = performance.now();
  private polling: NodeJS.Timeout | undefined;
  private pollBusy = false;
  private clocks = 0;

  constructor(
    readonly ctx: RunContext,
    readonly name: string,
    /** Ids this scenario should issue in all. */
    readonly budget: number,
    /** The seconds its phases take, planned: sets the pace (budget / plannedSeconds ids/s). */
    readonly plannedSeconds: number,
  ) {}

  /** Ids per second the load asks for. */
  get rate(): number {
    return Math.max(200, Math.round(this.budget / this.plannedSeconds));
  }

  /** ms since the scenario began. */
  now(): number {
    return performance.now() - this.t0;
  }

  /**
   * A unique name for this scenario's service names, tags and namespaces. No '-': a service name
   * is a leaf name, and ZooKeeper normal mode (Java Leaf's tree) refuses one with a '-'.
   */
  unique(prefix: string): string {
    const safe = this.name.replace(/[^A-Za-z0-9]+/g, ".");
    return `chaos.${safe}.${prefix}.${Date.now().toString(36)}`;
  }

  /** Runs `cleanup` when the scenario ends (in reverse order of registration). */
  onCleanup(cleanup: () => Promise<void> | void): void {
    this.cleanups.push(cleanup);
  }

  /** A fake clock for one server (requires libfaketime). */
  fakeClock(): FakeClock {
    if (!this.ctx.libfaketime) {
      throw new Error(
        "[leaf] [chaos] libfaketime is not installed: install Debian's `faketime` package " +
          "(apt-get install faketime), or set LEAF_CHAOS_LIBFAKETIME to libfaketimeMT.so.1",
      );
    }
    return new FakeClock({
      file: join(this.ctx.dir, `${this.name}-clock-${++this.clocks}.rc`),
      library: this.ctx.libfaketime,
    });
  }

  /** Creates (does not start) a server process; it is stopped when the scenario ends. */
  server(
    label: string,
    port: number,
    config: Record<string, unknown>,
    clock?: FakeClock,
    options: Pick<LeafProcessOptions, "dataDir" | "pidNamespace"> = {},
  ): LeafProcess {
    const server = new LeafProcess({
      cli: serverCli(),
      label,
      dir: join(this.ctx.dir, this.name),
      port,
      config,
      clock,
      ...options,
    });
    this.servers.push(server);
    this.workerIds.set(server, new Set());
    // A zk registry in normal mode keeps its cache file in {tmpdir}/{name}: ours to remove.
    if (typeof config.name === "string") {
      const leftover = join(tmpdir(), config.name);
      this.onCleanup(() => rmSync(leftover, { recursive: true, force: true }));
    }
    return server;
  }

  /** Starts servers in parallel and records their worker ids. */
  async startAll(...servers: LeafProcess[]): Promise<void> {
    const times = await Promise.all(servers.map((s) => s.start()));
    for (const [i, s] of servers.entries()) {
      this.ctx.log(`  ${s.label} ready in ${Math.round(times[i]!)} ms (${s.url})`);
    }
    await this.poll();
  }

  /** Declares `space` a segment tag's ids: judged against the tag's max_id at the end. */
  segmentSpace(space: string, database: MaxIdSource, tag: string): void {
    this.rules.set(space, { mode: "segment", database, tag });
  }

  /**
   * Declares `space` snowflake ids from `servers`: judged by time and the worker ids they held, in
   * `layout` (default: Leaf's, the servers' default).
   */
  snowflakeSpace(space: string, servers: LeafProcess[], layout: Layout = layouts.leaf): void {
    this.rules.set(space, { mode: "snowflake", servers, layout });
  }

  /** Declares `space` redis-sequence ids of `shards`: judged by second and shard. */
  redisSpace(space: string, shards: number[]): void {
    this.rules.set(space, { mode: "redisSequence", shards: new Set(shards) });
  }

  /** Starts the load on `targets`, paced to the scenario's rate, and polling of the servers. */
  startLoad(targets: LoopTarget[], requestTimeoutMs = 8000): LoadDriver {
    const driver = new LoadDriver(this.recorder, {
      targets,
      idsPerSecond: this.rate,
      requestTimeoutMs,
      // Bounded: the phases plus the slowest recovery allowed, and a little more than the budget.
      maxMs: (this.plannedSeconds + 120) * 1000,
      maxIds: Math.ceil(this.budget * 1.2) + 10_000,
      clock: () => this.now(),
    });
    this.driver = driver;
    driver.start();
    this.polling = setInterval(() => void this.poll(), 500);
    return driver;
  }

  /** Adds loops on servers started after the load (see {@link LoadDriver.add}). */
  addLoad(targets: LoopTarget[]): void {
    this.load.add(targets);
  }

  /** The load (after startLoad). */
  get load(): LoadDriver {
    if (!this.driver) throw new Error("[leaf] [chaos] the load has not started");
    return this.driver;
  }

  /** Runs `body` as a named phase and keeps the ids and errors of every loop during it. */
  async phase<T>(name: string, body: () => Promise<T>): Promise<T> {
    const before = this.load.counters();
    const fromMs = this.now();
    this.ctx.log(`  phase: ${name}`);
    try {
      return await body();
    } finally {
      const after = this.load.counters();
      this.phases.push({
        name,
        fromMs: Math.round(fromMs),
        toMs: Math.round(this.now()),
        // Loops added during the phase (a server started in it) count from zero.
        loops: after.map((a, i) =>
          diff(before[i] ?? { ...a, ids: 0, okRequests: 0, errors: {} }, a),
        ),
      });
    }
  }

  /** The counters of the phase named `name` for the loops `which` selects, summed. */
  phaseTotals(
    name: string,
    which: (label: string) => boolean,
  ): { ids: number; errors: Record<string, number> } {
    const phase = this.phases.find((p) => p.name === name);
    if (!phase) throw new Error(`[leaf] [chaos] no phase named ${name}`);
    const errors: Record<string, number> = {};
    let ids = 0;
    for (const loop of phase.loops.filter((l) => which(l.label))) {
      ids += loop.ids;
      for (const [code, n] of Object.entries(loop.errors)) errors[code] = (errors[code] ?? 0) + n;
    }
    return { ids, errors };
  }

  /**
   * While `body` runs, asks `server` for single snowflake ids back to back (no pacing), so that an
   * id is issued in nearly every millisecond: a clock step of a few ms then always lands right
   * after an issued id. The ids are recorded in `space` like the load's; a decrease counts as a
   * failed check.
   */
  async burst(server: LeafProcess, space: string, body: () => Promise<void>): Promise<BurstResult> {
    const result: BurstResult = { requests: 0, ids: 0, errors: {}, decreases: 0 };
    let done = false;
    const agent = keepAliveAgent(1);
    const loop = (async () => {
      let last: bigint | undefined;
      while (!done) {
        result.requests++;
        let code: string;
        try {
          const answer = await httpGet(server.port, "/api/snowflake/get/chaos", {
            agent,
            timeoutMs: 5000,
          });
          if (answer.status === 200 && /^[0-9]{1,19}\n?$/.test(answer.body)) {
            const id = BigInt(answer.body.trim());
            this.recorder.add(space, [id]);
            result.ids++;
            if (last !== undefined && id <= last) result.decreases++;
            last = id;
            continue;
          }
          code = errorCode(answer.status, answer.body);
        } catch (error) {
          if (!(error instanceof NoAnswer)) throw error;
          code = error.code;
        }
        result.errors[code] = (result.errors[code] ?? 0) + 1;
        await sleep(10);
      }
    })();
    try {
      await body();
    } finally {
      done = true;
      await loop;
      agent.destroy();
    }
    this.expect(
      result.decreases === 0,
      `${server.label}'s back-to-back ids only increased (${result.ids} ids)`,
    );
    return result;
  }

  /** Records a behaviour check. */
  expect(ok: boolean, text: string): boolean {
    this.checks.push({ ok, text });
    this.ctx.log(`  ${ok ? "ok  " : "FAIL"} ${text}`);
    return ok;
  }

  /** Records an observation for the report. */
  note(text: string): void {
    this.notes.push(text);
    this.ctx.log(`  note: ${text}`);
  }

  /** Waits until the loops of `server` (optionally one mode) get `n` more ids; ms or undefined. */
  waitForIds(
    server: LeafProcess,
    timeoutMs: number,
    mode?: LoopCounters["mode"],
    n = 1,
  ): Promise<number | undefined> {
    return this.load.waitForIds(
      (c) => c.server === server.label && (mode === undefined || c.mode === mode),
      n,
      timeoutMs,
    );
  }

  /** The worker ids `server` has held so far (from its monitor page). */
  workerIdsOf(server: LeafProcess): number[] {
    return [...(this.workerIds.get(server) ?? [])];
  }

  /** The server's snowflake state as /api/v1/monitor shows it now. */
  async snowflakeState(server: LeafProcess): Promise<MonitorSnowflake | undefined> {
    const page = await server.getJson<{ snowflake?: MonitorSnowflake }>("/api/v1/monitor");
    return page?.snowflake;
  }

  /** Whether any state change of `server` matching `pattern` was seen between two instants. */
  sawState(
    server: LeafProcess,
    pattern: RegExp,
    fromMs = 0,
    toMs = Number.POSITIVE_INFINITY,
  ): boolean {
    return this.changes.some(
      (c) =>
        c.server === server.label && c.atMs >= fromMs && c.atMs <= toMs && pattern.test(c.what),
    );
  }

  /**
   * Reads a counter from the server's /metrics (sum over matching label sets); undefined if down.
   */
  async metric(server: LeafProcess, name: string, labels: string): Promise<number | undefined> {
    const text = await server.getText("/metrics");
    if (text === undefined) return undefined;
    let sum = 0;
    for (const line of text.split("\n")) {
      if (line.startsWith(`${name}{`) && line.includes(labels)) {
        sum += Number(line.slice(line.lastIndexOf(" ") + 1));
      }
    }
    return sum;
  }

  /** Polls every running server's monitor page: lease state, worker ids, redis status. */
  async poll(): Promise<void> {
    if (this.pollBusy) return;
    this.pollBusy = true;
    try {
      await Promise.all(
        this.servers.map(async (server) => {
          const page = await server
            .getJson<{ snowflake?: MonitorSnowflake; redisSequence?: { status?: string } }>(
              "/api/v1/monitor",
              2000,
            )
            .catch(() => undefined);
          if (!page) return;
          const parts: string[] = [];
          const sf = page.snowflake;
          if (sf?.running) {
            const ids = this.workerIds.get(server)!;
            if (typeof sf.workerId === "number") ids.add(sf.workerId);
            if (typeof sf.activeWorkerId === "number") ids.add(sf.activeWorkerId);
            for (const b of sf.backups ?? [])
              if (typeof b.workerId === "number") ids.add(b.workerId);
            parts.push(`snowflake ${sf.state} worker ${sf.workerId} active ${sf.activeWorkerId}`);
          }
          if (page.redisSequence?.status) parts.push(`redis ${page.redisSequence.status}`);
          const what = parts.join(", ");
          if (what !== "" && this.lastState.get(server) !== what) {
            this.lastState.set(server, what);
            this.changes.push({ atMs: Math.round(this.now()), server: server.label, what });
          }
        }),
      );
    } finally {
      this.pollBusy = false;
    }
  }

  /**
   * Ends the scenario: keeps the load going until the budget is reached (bounded), stops it, checks
   * every id, stops the servers. Returns what the report needs.
   */
  async finish(): Promise<{ loops: LoopReport[]; spaces: SpaceCheck[] }> {
    const driver = this.load;
    const tailLimitMs = 90_000;
    const tailStart = performance.now();
    if (driver.ids < this.budget && !driver.finished) {
      await this.phase("tail (until the id budget is reached)", async () => {
        while (
          driver.ids < this.budget &&
          !driver.finished &&
          performance.now() - tailStart < tailLimitMs
        ) {
          await sleep(100);
        }
      });
    }
    await driver.stop();
    clearInterval(this.polling);
    await this.poll();
    const endWall = Date.now();
    const loops = driver.reports();
    const spaces: SpaceCheck[] = [];
    for (const summary of this.recorder.summarize()) {
      spaces.push(await this.checkSpace(summary, endWall));
    }
    return { loops, spaces };
  }

  /** Stops every server (SIGTERM) and runs the cleanups. Safe to call more than once. */
  async dispose(): Promise<void> {
    clearInterval(this.polling);
    if (this.driver && !this.driver.finished) await this.driver.stop();
    await Promise.all(this.servers.map((s) => s.stop().catch(() => undefined)));
    for (const cleanup of this.cleanups.splice(0).reverse()) {
      await Promise.resolve()
        .then(cleanup)
        .catch(() => undefined);
    }
  }

  private async checkSpace(summary: SpaceSummary, endWall: number): Promise<SpaceCheck> {
    const rule = this.rules.get(summary.space);
    const ids = this.recorder.column(summary.space).view(); // sorted by summarize()
    const bad: string[] = [];
    let undecodable = 0;
    let decodeRule = "no rule declared for this space";
    let serverDecodeSample = 0;
    let serverDecodeMismatches = 0;
    const reject = (id: bigint) => {
      undecodable++;
      if (bad.length < 5) bad.push(id.toString());
    };
    if (!rule) {
      for (const id of ids) reject(id);
    } else if (rule.mode === "segment") {
      const maxId = await rule.database.maxId(rule.tag);
      decodeRule = `1 <= id < the tag's max_id at the end (${maxId})`;
      for (const id of ids) if (id < 1n || id >= maxId) reject(id);
    } else if (rule.mode === "snowflake") {
      const layout = rule.layout;
      const workers = new Set(rule.servers.flatMap((s) => this.workerIdsOf(s)));
      const from = this.startedAtWall - SNOWFLAKE_SLACK_BEFORE_MS;
      const to = endWall + TIME_SLACK_AFTER_MS;
      decodeRule =
        `${layout.name} layout; time from ${new Date(from).toISOString()} to ${new Date(to).toISOString()}; ` +
        `worker id one of ${[...workers].sort((a, b) => a - b).join(", ") || "(none seen)"}`;
      for (const id of ids) {
        const parts = layout.decompose(id);
        if (parts.timestampMs < from || parts.timestampMs > to || !workers.has(parts.workerId))
          reject(id);
      }
      const live = rule.servers.find((s) => s.running);
      if (live && ids.length > 0) {
        const step = Math.max(1, Math.floor(ids.length / 20));
        for (let i = 0; i < ids.length; i += step) {
          const id = ids[i]!;
          const answer = await live.getJson<{
            timestamp: string;
            workerId: string;
            sequenceId: string;
          }>(`/decodeSnowflakeId?snowflakeId=${id}`);
          serverDecodeSample++;
          const parts = layout.decompose(id);
          const agrees =
            answer?.timestamp.startsWith(`${parts.timestampMs}(`) === true &&
            answer.workerId === String(parts.workerId) &&
            answer.sequenceId === String(parts.sequence);
          if (!agrees) {
            serverDecodeMismatches++;
          }
        }
      }
    } else {
      const layout = layouts.redisSequence;
      const from = this.startedAtWall - 5000;
      const to = endWall + TIME_SLACK_AFTER_MS;
      decodeRule =
        `redis-sequence layout; second from ${new Date(from).toISOString()} to ${new Date(to).toISOString()}; ` +
        `shard one of ${[...rule.shards].join(", ")}`;
      for (const id of ids) {
        const parts = layout.decompose(id);
        if (
          parts.timestampMs < from - 1000 ||
          parts.timestampMs > to ||
          !rule.shards.has(parts.workerId)
        ) {
          reject(id);
        }
      }
    }
    return {
      ...summary,
      undecodable,
      undecodableExamples: bad,
      decodeRule,
      serverDecodeSample,
      serverDecodeMismatches,
    };
  }
}

/** What a {@link ScenarioRun.burst} got. */
export interface BurstResult {
  requests: number;
  ids: number;
  errors: Record<string, number>;
  decreases: number;
}

/** The snowflake part of /api/v1/monitor. */
export interface MonitorSnowflake {
  running?: boolean;
  registry?: string;
  state?: string;
  workerId?: number;
  activeWorkerId?: number;
  backups?: Array<{ workerId?: number }>;
  lastTimestamp?: number;
}

function diff(before: LoopCounters, after: LoopCounters): PhaseReport["loops"][number] {
  const errors: Record<string, number> = {};
  for (const [code, n] of Object.entries(after.errors)) {
    const d = n - (before.errors[code] ?? 0);
    if (d > 0) errors[code] = d;
  }
  return { label: after.label, ids: after.ids - before.ids, errors };
}

/** Resolves after `ms`. */
export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
