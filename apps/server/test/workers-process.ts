// Shared by the tests of servers with several worker processes (server.workers): such a server as a
// real process (the CLI from source, through tsx), its workers as the monitor lists them, load on
// keep-alive connections that keeps every id it receives, and the check that both workers served
// with their own worker ids and ranges.
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import type { Agent } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  countRepeatedIds,
  freePort,
  httpGet,
  IdLog,
  keepAliveAgent,
  LeafServerProcess,
  NoAnswer,
  waitUntil,
} from "@leaf/testkit";
import { expect } from "vitest";
import { CLI } from "./cli-process";

/** A worker process as `/api/v1/monitor` lists it. */
export interface ListedWorker {
  slot: number;
  pid: number | undefined;
  state: string;
  restarts: number;
  missing?: string;
  summary: {
    ready: boolean;
    workerId: number | null;
    node: string | null;
    tags: number | null;
    ranges: number | null;
  } | null;
}

const dirs: string[] = [];

/** Removes the folders of every server {@link workersServer} made (call once they stopped). */
export function removeServerFolders(): void {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
}

/** A server of `workers` worker processes on a free port, its data in a new folder (not started). */
export async function workersServer(
  label: string,
  config: Record<string, unknown>,
  options: {
    workers?: number;
    dir?: string;
    port?: number;
    dataDir?: string;
    env?: Record<string, string>;
  } = {},
): Promise<LeafServerProcess> {
  const dir = options.dir ?? mkdtempSync(join(tmpdir(), "leaf-workers-"));
  if (options.dir === undefined) dirs.push(dir);
  const server = (config.server ?? {}) as Record<string, unknown>;
  return new LeafServerProcess({
    cli: CLI,
    label,
    dir,
    port: options.port ?? (await freePort()),
    dataDir: options.dataDir,
    env: options.env,
    config: { ...config, server: { drainMs: 0, ...server, workers: options.workers ?? 2 } },
    readyTimeoutMs: 90_000,
  });
}

/** The server's worker processes, as its monitor lists them (any worker may answer). */
export async function listWorkers(server: LeafServerProcess): Promise<ListedWorker[]> {
  const state = await server.getJson<{ workers: { list: ListedWorker[] } | null }>(
    "/api/v1/monitor",
    5000,
  );
  if (!state?.workers) throw new Error(`server ${server.label} did not list its workers`);
  return state.workers.list;
}

/** Whether process `pid` still exists (a zombie counts as gone: it issues nothing). */
export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  try {
    return !/^State:\s+Z/m.test(readFileSync(`/proc/${pid}/status`, "utf8"));
  } catch {
    return false;
  }
}

/**
 * SIGKILLs worker process `slot` of `server`; resolves with the ms until the primary ran a new
 * process in its slot.
 */
export async function killWorker(server: LeafServerProcess, slot: number): Promise<number> {
  const pid = (await listWorkers(server))[slot - 1]!.pid!;
  process.kill(pid, "SIGKILL");
  const killedAt = Date.now();
  await waitUntil(`worker ${slot} of ${server.label} started again`, async () => {
    const w = (await listWorkers(server).catch(() => []))[slot - 1];
    return w !== undefined && w.pid !== pid && w.state === "running";
  });
  return Date.now() - killedAt;
}

/** A path to ask, its ids kept under `space`. */
export interface Ask {
  space: string;
  path: string;
}

/** One loop of a load: its asks in turn, again and again (one ask, or several). */
export type LoadLoop = Ask | Ask[];

/**
 * Keep-alive load on one server: `loops` concurrent loops over `connections` sockets (node:cluster
 * hands connections to the workers in turn, so several sockets reach every worker). Every id
 * answered (text, one per line, a JSON answer's `ids`, or a range's `[start, end)`) is kept per
 * space; every answer without
 * ids is counted by its code.
 */
export class IdLoad {
  readonly ids = new Map<string, IdLog>();
  readonly codes = new Map<string, number>();
  answers = 0;
  private running = true;
  private readonly agent: Agent;
  private readonly done: Promise<void>;

  constructor(
    readonly port: number,
    loops: LoadLoop[],
    connections = 8,
  ) {
    this.agent = keepAliveAgent(connections);
    // One loop after the other: node:cluster hands connections that arrive in a burst to whichever
    // worker acknowledges first, and keep-alive connections stay where they landed.
    this.done = Promise.all(
      loops.map(async (loop, i) => {
        await new Promise((resolve) => setTimeout(resolve, i * 30));
        await this.loop(loop);
      }),
    ).then(() => undefined);
  }

  /** Ids kept so far, all spaces together. */
  get count(): number {
    let n = 0;
    for (const log of this.ids.values()) n += log.count;
    return n;
  }

  /** Stops asking, waits for the answers in flight. */
  async stop(): Promise<void> {
    this.running = false;
    await this.done;
    this.agent.destroy();
  }

  /** Resolves once `n` more ids than now were kept. */
  async more(n: number, timeoutMs = 60_000): Promise<void> {
    const target = this.count + n;
    const deadline = Date.now() + timeoutMs;
    while (this.count < target) {
      if (Date.now() > deadline) {
        throw new Error(
          `load: ${this.count} of ${target} ids after ${timeoutMs} ms; codes ${JSON.stringify(Object.fromEntries(this.codes))}`,
        );
      }
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }

  private async loop(loop: LoadLoop): Promise<void> {
    const asks = Array.isArray(loop) ? loop : [loop];
    for (let turn = 0; this.running; turn++) {
      const { space, path } = asks[turn % asks.length]!;
      let log = this.ids.get(space);
      if (!log) {
        log = new IdLog();
        this.ids.set(space, log);
      }
      try {
        const answer = await httpGet(this.port, path, { agent: this.agent, timeoutMs: 5000 });
        this.answers++;
        if (answer.status === 200 && answer.body.startsWith("{")) {
          const json = JSON.parse(answer.body) as { ids?: string[]; start?: string; end?: string };
          if (json.ids) for (const id of json.ids) log.push(BigInt(id));
          else {
            // A range lease (/api/v1/segment/:tag/range): every id in [start, end) is the caller's.
            for (let id = BigInt(json.start!); id < BigInt(json.end!); id++) log.push(id);
          }
        } else if (answer.status === 200) {
          for (const line of answer.body.split("\n")) if (line !== "") log.push(BigInt(line));
        } else {
          const code = /^([A-Z_]+):/m.exec(answer.body)?.[1] ?? `HTTP ${answer.status}`;
          this.note(code);
          await new Promise((resolve) => setTimeout(resolve, 20));
        }
      } catch (error) {
        this.note(error instanceof NoAnswer ? error.code : String(error));
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    }
  }

  private note(code: string): void {
    this.codes.set(code, (this.codes.get(code) ?? 0) + 1);
  }
}

/** A segment tag as one worker's `/api/v1/monitor` shows it. */
export interface MonitoredTag {
  tag: string;
  tableStep: number;
  segments: Array<{ max: string; step: number; stride?: number; remainder?: number } | null>;
}

/**
 * Asks `/api/v1/monitor` on a new connection (node:cluster hands each to the next worker): the
 * worker that answered and its view of `tag`; null when no answer came.
 */
export async function workerTagView(
  port: number,
  tag: string,
): Promise<{ slot: number; tag: MonitoredTag | undefined } | null> {
  const answer = await httpGet(port, "/api/v1/monitor", {
    timeoutMs: 5000,
    headers: { connection: "close" },
  }).catch(() => null);
  if (answer?.status !== 200) return null;
  const state = JSON.parse(answer.body) as {
    workers: { answeredBy: number } | null;
    segment: { tags?: MonitoredTag[] };
  };
  return { slot: state.workers!.answeredBy, tag: state.segment.tags?.find((t) => t.tag === tag) };
}

/** A range a worker held: [start, end), of one residue class when `stride` is set. */
interface HeldRange {
  start: bigint;
  end: bigint;
  stride?: number;
  remainder?: number;
}

/** Whether two ranges may hold a common id: their spans meet, unless of one stride and two classes. */
function shareIds(a: HeldRange, b: HeldRange): boolean {
  if (a.end <= b.start || b.end <= a.start) return false;
  return !(a.stride !== undefined && a.stride === b.stride && a.remainder !== b.remainder);
}

/**
 * Asks every 50 ms which ranges of `tag` a worker holds (current and next; start = max - step) and
 * keeps them per worker, keyed by their text.
 */
class RangeSampler {
  readonly ranges = new Map<number, Map<string, HeldRange>>();
  private running = true;
  private readonly done: Promise<void>;

  constructor(
    private readonly port: number,
    private readonly tag: string,
  ) {
    this.done = this.loop();
  }

  /**
   * Stops once every one of `workers` showed its ranges (they stay in its buffers after the load),
   * or after `timeoutMs`: a short load on a loaded machine may end before the samples, each on a
   * new connection that node:cluster hands to the next worker, reached both.
   */
  async stop(workers = 2, timeoutMs = 15_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (this.ranges.size < workers && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    this.running = false;
    await this.done;
  }

  private async loop(): Promise<void> {
    while (this.running) {
      const view = await workerTagView(this.port, this.tag);
      for (const r of view?.tag?.segments ?? []) {
        if (r === null || r.step === 0) continue;
        const end = BigInt(r.max);
        const range: HeldRange = {
          start: end - BigInt(r.step),
          end,
          stride: r.stride,
          remainder: r.remainder,
        };
        const seen = this.ranges.get(view!.slot) ?? new Map<string, HeldRange>();
        this.ranges.set(view!.slot, seen);
        seen.set(`${range.start}-${end}/${r.stride ?? 1}/${r.remainder ?? 0}`, range);
      }
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }
}

/** The worker id of a snowflake id of Leaf's layout (41 + 10 + 12 bits). */
export function leafWorkerId(id: bigint): number {
  return Number((id >> 12n) & 1023n);
}

/** The modes {@link servesFromBoth} asks for: a segment tag, snowflake ids, redis sequence ids. */
export interface Spaces {
  segment?: string;
  snowflake?: boolean;
  redisSequence?: boolean;
}

/**
 * Load on both workers until `ids` ids were received, then every id counted: none twice in a
 * space; the snowflake ids carry both workers' ids and only theirs; both workers took segment
 * ranges; both workers' redis sequences are ready.
 */
export async function servesFromBoth(
  server: LeafServerProcess,
  spaces: Spaces,
  ids = 60_000,
): Promise<{ workers: ListedWorker[]; counts: Record<string, number> }> {
  // Each loop asks for every kind in turn: whichever worker its connection landed on, it counts.
  const asks: Ask[] = [];
  // Java Leaf's paths, the JSON API and the range lease (what @leaf/client asks for): one id
  // space per mode, whichever path answered.
  if (spaces.segment) {
    const tag = spaces.segment;
    asks.push(
      { space: "segment", path: `/api/segment/get/${tag}?count=100` },
      { space: "segment", path: `/api/v1/segment/${tag}/ids?count=100` },
      { space: "segment", path: `/api/v1/segment/${tag}/range?count=100` },
    );
  }
  if (spaces.snowflake) {
    asks.push(
      { space: "snowflake", path: "/api/snowflake/get/k?count=100" },
      { space: "snowflake", path: "/api/v1/snowflake/ids?count=100" },
    );
  }
  if (spaces.redisSequence) {
    asks.push({ space: "redisSequence", path: "/api/v1/redis-sequence/ids?shard=3&count=100" });
  }
  const load = new IdLoad(server.port, Array(8).fill(asks), 8);
  const sampler = spaces.segment ? new RangeSampler(server.port, spaces.segment) : null;
  await load.more(ids);
  await load.stop();
  await sampler?.stop();
  expect(load.codes.size, JSON.stringify(Object.fromEntries(load.codes))).toBe(0);
  const workers = await listWorkers(server);
  expect(workers.map((w) => w.state)).toEqual(["running", "running"]);
  const counts: Record<string, number> = {};
  for (const [space, log] of load.ids) {
    const { duplicates, total, sorted } = countRepeatedIds([log]);
    counts[space] = total;
    expect(total, `${space}: ids answered`).toBeGreaterThan(0);
    expect(duplicates, `${space}: ids answered twice`).toBe(0);
    if (space === "snowflake") {
      const held = workers.map((w) => w.summary!.workerId);
      expect(new Set(held).size, "each worker holds its own worker id").toBe(2);
      const seen = new Set<number>();
      for (const id of sorted) seen.add(leafWorkerId(id));
      expect([...seen].sort()).toEqual([...held].sort());
    }
  }
  if (spaces.segment) {
    for (const w of workers)
      expect(w.summary!.ranges, `worker ${w.slot} took ranges`).toBeGreaterThan(0);
    // The ranges themselves, as each worker's monitor showed them during the load: every range a
    // worker held is disjoint from every range the other held.
    const held = sampler!.ranges;
    expect([...held.keys()].sort(), "both workers showed their ranges").toEqual(
      workers.map((w) => w.slot).sort(),
    );
    const [a, b] = [...held.values()];
    for (const [ka, ra] of a!) {
      for (const [kb, rb] of b!) {
        expect(shareIds(ra, rb), `range ${ka} of one worker overlaps ${kb} of the other`).toBe(
          false,
        );
      }
    }
  }
  if (spaces.redisSequence) {
    // Its state is a gauge: one line per worker process.
    const metrics = (await server.getText("/metrics", 5000)) ?? "";
    for (const w of workers) {
      expect(metrics).toContain(`leaf_redis_sequence_state{worker="${w.slot}",state="ready"} 1`);
    }
  }
  return { workers, counts };
}
