// Load on the servers' HTTP endpoints: a few concurrent loops, each asking one server for one kind
// of id at a steady pace (single ids and `?count=N` batches), bounded in ids, requests and time.
// Every id goes to the recorder; every failure is counted by its code; the longest time a loop
// waited for an id is kept; ids from one process are checked to increase.
import type { Agent } from "node:http";
import { httpGet, keepAliveAgent, NoAnswer } from "./http-get";
import type { IdRecorder } from "./id-recorder";
import type { LeafProcess } from "./leaf-process";

/** What a loop asks for. */
export type Endpoint =
  | { mode: "segment"; tag: string }
  | { mode: "snowflake"; key: string }
  | { mode: "redisSequence"; shard: number };

/** One loop: a server, an endpoint and the id space its ids belong to. */
export interface LoopTarget {
  server: LeafProcess;
  endpoint: Endpoint;
  /** Ids are unique within a space: "segment:orders", "snowflake:chaos-1", "redisSequence:ns". */
  space: string;
  /**
   * Whether ids from one process must increase (segment ids do; snowflake ids do while no backup
   * worker id is used). Decreases are counted either way.
   */
  increasing: boolean;
}

/** Options of {@link LoadDriver}. */
export interface LoadOptions {
  targets: LoopTarget[];
  /** Ids per second wanted from all loops together. */
  idsPerSecond: number;
  /** Requests per second per loop (default 40). Every fourth request asks for a single id. */
  requestsPerSecond?: number;
  /** Largest `count` of a batch (default 10,000, the server's default limit). */
  maxBatch?: number;
  /** Time limit of one request in ms (default 5,000). */
  requestTimeoutMs?: number;
  /** Hard limit of the whole run in ms: every loop stops then. */
  maxMs: number;
  /** Hard limit of ids from all loops together: every loop stops once reached. */
  maxIds: number;
  /** The time base of every "ms" in the reports (default: ms since the driver was created). */
  clock?: () => number;
}

/** Failures of one code seen by one loop. */
export interface ErrorTally {
  count: number;
  /** ms since the driver started, of the first and last such failure. */
  firstAtMs: number;
  lastAtMs: number;
  /**
   * What the caller was told: the first message of each kind (numbers aside), up to
   * {@link MAX_SAMPLES}, cut to 400 characters each.
   */
  samples: string[];
}

/** Distinct messages kept per code and loop. */
const MAX_SAMPLES = 8;

/** Adds `message` to `samples` unless one differing only in its numbers is there. */
function keepSample(samples: string[], message: string): void {
  if (message === "" || samples.length >= MAX_SAMPLES) return;
  const shape = (text: string) => text.replace(/[0-9]+/g, "#");
  const kind = shape(message);
  if (!samples.some((x) => shape(x) === kind)) samples.push(message);
}

/** Everything one loop saw. */
export interface LoopReport {
  label: string;
  server: string;
  mode: Endpoint["mode"];
  space: string;
  requests: number;
  okRequests: number;
  ids: number;
  /** Failures by code: "503 SEGMENTS_EXHAUSTED (-3)", "ECONNREFUSED", "TIMEOUT", ... */
  errors: Record<string, ErrorTally>;
  /**
   * The longest time this loop waited for an id: from the start of the first request that got
   * none (or a slow one) to the end of the next request that got ids; ms.
   */
  longestNoIdMs: number;
  /** When that longest wait began and ended, ms since the driver started. */
  longestNoIdFromMs: number;
  longestNoIdToMs: number;
  /** True when the loop ended while still getting no id (not recovered). */
  endedWithoutIds: boolean;
  /** Ids that were not above the previous id from the same process (per loop and incarnation). */
  decreases: number;
  decreaseExamples: string[];
  /** Whether decreases count as a failure for this loop (see {@link LoopTarget.increasing}). */
  mustIncrease: boolean;
  /** Answers with status 200 whose body held no valid id. */
  malformed: number;
  /** The lowest and highest id this loop received (decimal strings; null before any). */
  lowestId: string | null;
  highestId: string | null;
}

/** Counters of one loop at one instant, for measuring a phase. */
export interface LoopCounters {
  label: string;
  server: string;
  mode: Endpoint["mode"];
  ids: number;
  okRequests: number;
  errors: Record<string, number>;
}

/** The lowest and highest id of some loops (optionally of one start of their server). */
export interface IdRange {
  ids: number;
  lowest: bigint | undefined;
  highest: bigint | undefined;
}

const ID_TEXT = /^[0-9]{1,19}$/;

class Loop {
  requests = 0;
  okRequests = 0;
  ids = 0;
  malformed = 0;
  readonly errors = new Map<string, ErrorTally>();
  longest = { ms: 0, from: 0, to: 0 };
  noIdSince: number | undefined;
  decreases = 0;
  readonly decreaseExamples: string[] = [];
  private readonly lastIds = new Map<number, bigint>();
  /** Per start of the server (incarnation): ids received, the lowest and the highest. */
  readonly ranges = new Map<number, IdRange>();
  private n = 0;

  constructor(
    readonly target: LoopTarget,
    readonly label: string,
    private readonly agent: Agent,
    private readonly recorder: IdRecorder,
  ) {}

  path(count: number): string {
    const { endpoint } = this.target;
    const batch = count > 1;
    switch (endpoint.mode) {
      case "segment":
        return `/api/segment/get/${encodeURIComponent(endpoint.tag)}${batch ? `?count=${count}` : ""}`;
      case "snowflake":
        return `/api/snowflake/get/${encodeURIComponent(endpoint.key)}${batch ? `?count=${count}` : ""}`;
      case "redisSequence":
        return batch
          ? `/api/v1/redis-sequence/ids?shard=${endpoint.shard}&count=${count}`
          : `/api/v1/redis-sequence/id?shard=${endpoint.shard}`;
    }
  }

  /** One request; returns the ids received (empty on failure). */
  async once(batch: number, timeoutMs: number, now: () => number): Promise<number> {
    const count = this.n++ % 4 === 0 ? 1 : batch;
    const incarnation = this.target.server.incarnation;
    const startedAt = now();
    this.requests++;
    let ids: bigint[] | undefined;
    let failure: string | undefined;
    let sample = "";
    try {
      const answer = await httpGet(this.target.server.port, this.path(count), {
        agent: this.agent,
        timeoutMs,
      });
      if (answer.status === 200) {
        ids = this.parse(answer.body);
        if (ids === undefined || ids.length !== count) {
          this.malformed++;
          failure = "200 MALFORMED";
          ids = undefined;
        }
      } else {
        failure = errorCode(answer.status, answer.body);
        sample = errorMessage(answer.body);
      }
    } catch (error) {
      if (!(error instanceof NoAnswer)) throw error;
      failure = error.code;
      sample = error.message;
    }
    const endedAt = now();
    if (ids === undefined) {
      const tally = this.errors.get(failure!);
      if (tally) {
        tally.count++;
        tally.lastAtMs = endedAt;
        keepSample(tally.samples, sample);
      } else {
        const samples: string[] = [];
        keepSample(samples, sample);
        this.errors.set(failure!, { count: 1, firstAtMs: endedAt, lastAtMs: endedAt, samples });
      }
      this.noIdSince ??= startedAt;
      return 0;
    }
    const waited = endedAt - (this.noIdSince ?? startedAt);
    if (waited > this.longest.ms) {
      this.longest = { ms: waited, from: this.noIdSince ?? startedAt, to: endedAt };
    }
    this.noIdSince = undefined;
    this.okRequests++;
    this.ids += ids.length;
    this.recorder.add(this.target.space, ids);
    this.checkIncreasing(incarnation, ids);
    return ids.length;
  }

  private checkIncreasing(incarnation: number, ids: bigint[]): void {
    const range = this.ranges.get(incarnation) ?? { ids: 0, lowest: undefined, highest: undefined };
    this.ranges.set(incarnation, widen(range, ids));
    let last = this.lastIds.get(incarnation);
    for (const id of ids) {
      if (last !== undefined && id <= last) {
        this.decreases++;
        if (this.decreaseExamples.length < 5) this.decreaseExamples.push(`${last} then ${id}`);
      }
      last = id;
    }
    this.lastIds.set(incarnation, last!);
  }

  /** Ids from a 200 answer: text (one per line) or the redis sequence's JSON. */
  private parse(body: string): bigint[] | undefined {
    let texts: unknown[];
    if (this.target.endpoint.mode === "redisSequence") {
      const json = JSON.parse(body) as { id?: unknown; ids?: unknown };
      texts = Array.isArray(json.ids) ? json.ids : [json.id];
    } else {
      texts = body.split("\n").filter((line) => line !== "");
    }
    const ids: bigint[] = [];
    for (const text of texts) {
      if (typeof text !== "string" || !ID_TEXT.test(text)) return undefined;
      const id = BigInt(text);
      if (id > 0x7fffffffffffffffn) return undefined;
      ids.push(id);
    }
    return ids;
  }

  counters(): LoopCounters {
    const errors: Record<string, number> = {};
    for (const [code, tally] of this.errors) errors[code] = tally.count;
    return {
      label: this.label,
      server: this.target.server.label,
      mode: this.target.endpoint.mode,
      ids: this.ids,
      okRequests: this.okRequests,
      errors,
    };
  }

  report(endedAt: number): LoopReport {
    let longest = this.longest;
    const open = this.noIdSince !== undefined;
    if (open && endedAt - this.noIdSince! > longest.ms) {
      longest = { ms: endedAt - this.noIdSince!, from: this.noIdSince!, to: endedAt };
    }
    return {
      label: this.label,
      server: this.target.server.label,
      mode: this.target.endpoint.mode,
      space: this.target.space,
      requests: this.requests,
      okRequests: this.okRequests,
      ids: this.ids,
      errors: Object.fromEntries(this.errors),
      longestNoIdMs: Math.round(longest.ms),
      longestNoIdFromMs: Math.round(longest.from),
      longestNoIdToMs: Math.round(longest.to),
      endedWithoutIds: open,
      decreases: this.decreases,
      decreaseExamples: this.decreaseExamples,
      mustIncrease: this.target.increasing,
      malformed: this.malformed,
      ...(() => {
        const all = mergeRanges([...this.ranges.values()]);
        return {
          lowestId: all.lowest?.toString() ?? null,
          highestId: all.highest?.toString() ?? null,
        };
      })(),
    };
  }
}

/**
 * Extracts the error code of a failed answer: JSON `{code, leafCode}` or Java Leaf's plain text
 * (`Result{id=-3, status=EXCEPTION}` then `CODE: message`). "503 SEGMENTS_EXHAUSTED (-3)".
 */
export function errorCode(status: number, body: string): string {
  let code: string | undefined;
  let leafCode: number | undefined;
  try {
    const json = JSON.parse(body) as { code?: unknown; leafCode?: unknown };
    if (typeof json.code === "string") code = json.code;
    if (typeof json.leafCode === "number") leafCode = json.leafCode;
  } catch {
    code = /^([A-Z][A-Z_]+): /m.exec(body)?.[1];
    const leaf = /Result\{id=(-?\d+), status=EXCEPTION\}/.exec(body)?.[1];
    if (leaf !== undefined) leafCode = Number(leaf);
  }
  return `${status} ${code ?? "UNKNOWN"}${leafCode !== undefined ? ` (${leafCode})` : ""}`;
}

/** The `message` of a JSON error body, or the text after Java Leaf's plain-text code line. */
export function errorMessage(body: string): string {
  let text: string;
  try {
    const json = JSON.parse(body) as { message?: unknown };
    text = typeof json.message === "string" ? json.message : body;
  } catch {
    text = /^[A-Z][A-Z_]+: (.*)$/m.exec(body)?.[1] ?? body;
  }
  return text.length > 400 ? `${text.slice(0, 400)}...` : text;
}

/** `range` widened by `ids`. */
export function widen(range: IdRange, ids: Iterable<bigint>): IdRange {
  let { ids: n, lowest, highest } = range;
  for (const id of ids) {
    n++;
    if (lowest === undefined || id < lowest) lowest = id;
    if (highest === undefined || id > highest) highest = id;
  }
  return { ids: n, lowest, highest };
}

/** The union of id ranges. */
export function mergeRanges(ranges: IdRange[]): IdRange {
  let all: IdRange = { ids: 0, lowest: undefined, highest: undefined };
  for (const r of ranges) {
    const bounds = [r.lowest, r.highest].filter((x): x is bigint => x !== undefined);
    all = { ...widen(all, bounds), ids: all.ids + r.ids };
  }
  return all;
}

/** The load: start it, let scenarios look at its counters, stop it, read the reports. */
export class LoadDriver {
  private readonly loops: Loop[] = [];
  private readonly agents = new Map<LeafProcess, Agent>();
  private readonly clock: () => number;
  private readonly recorder: IdRecorder;
  private stopping = false;
  private running: Promise<void> | undefined;
  private readonly runs: Array<Promise<void>> = [];
  private idsPerSecond: number;
  private totalIds = 0;
  private endedAt = 0;

  constructor(
    recorder: IdRecorder,
    private readonly options: LoadOptions,
  ) {
    this.idsPerSecond = options.idsPerSecond;
    this.recorder = recorder;
    const t0 = performance.now();
    this.clock = options.clock ?? (() => performance.now() - t0);
    this.makeLoops(options.targets);
  }

  private makeLoops(targets: LoopTarget[]): Loop[] {
    const perServer = new Map<LeafProcess, number>();
    for (const t of targets) perServer.set(t.server, (perServer.get(t.server) ?? 0) + 1);
    for (const [server, n] of perServer) {
      if (this.agents.has(server))
        throw new Error(`[leaf] [chaos] server ${server.label} already has loops`);
      this.agents.set(server, keepAliveAgent(n));
    }
    const loops = targets.map(
      (target) =>
        new Loop(
          target,
          `${target.server.label} ${target.space}`,
          this.agents.get(target.server)!,
          this.recorder,
        ),
    );
    this.loops.push(...loops);
    return loops;
  }

  /**
   * Adds loops on servers that have none yet (a server started during the scenario); they share the
   * pace from their first request on.
   */
  add(targets: LoopTarget[]): void {
    if (!this.running || this.stopping) throw new Error("[leaf] [chaos] the load is not running");
    for (const loop of this.makeLoops(targets)) this.runs.push(this.run(loop));
  }

  /**
   * The lowest and highest id received by the loops `which` selects, over every start of their
   * server or only start number `incarnation`.
   */
  idRange(which: (loop: LoopCounters) => boolean, incarnation?: number): IdRange {
    const ranges: IdRange[] = [];
    for (const loop of this.loops) {
      if (!which(loop.counters())) continue;
      for (const [n, range] of loop.ranges) {
        if (incarnation === undefined || n === incarnation) ranges.push(range);
      }
    }
    return mergeRanges(ranges);
  }

  /** The driver's time in ms (see {@link LoadOptions.clock}). */
  now(): number {
    return this.clock();
  }

  /** Ids received so far by every loop. */
  get ids(): number {
    return this.totalIds;
  }

  /** Starts every loop. */
  start(): void {
    if (this.running) return;
    this.runs.push(...this.loops.map((loop) => this.run(loop)));
    this.running = (async () => {
      // Loops added later join `runs`: wait until no new one appeared.
      let settled = 0;
      while (settled < this.runs.length) {
        settled = this.runs.length;
        await Promise.all(this.runs);
      }
      this.endedAt = this.now();
    })();
  }

  /** Changes the pace of every loop from its next request on. */
  setRate(idsPerSecond: number): void {
    this.idsPerSecond = idsPerSecond;
  }

  /** Stops every loop after its current request; resolves when all have stopped. */
  async stop(): Promise<void> {
    this.stopping = true;
    await this.running;
    for (const agent of this.agents.values()) agent.destroy();
  }

  /** Whether every loop has stopped (limits reached or stop() called). */
  get finished(): boolean {
    return this.endedAt > 0;
  }

  /** Counters of every loop now. */
  counters(): LoopCounters[] {
    return this.loops.map((loop) => loop.counters());
  }

  /**
   * Waits until the loops `which` selects have received `n` more ids (all together), or `timeoutMs`
   * passes. Resolves with the ms waited, or undefined on timeout (or when the load has stopped).
   */
  async waitForIds(
    which: (loop: LoopCounters) => boolean,
    n: number,
    timeoutMs: number,
  ): Promise<number | undefined> {
    const count = () =>
      this.counters()
        .filter(which)
        .reduce((sum, c) => sum + c.ids, 0);
    const from = count();
    const start = performance.now();
    while (performance.now() - start < timeoutMs) {
      if (count() - from >= n) return performance.now() - start;
      if (this.finished) return undefined;
      await sleep(20);
    }
    return undefined;
  }

  /** Reports of every loop; call after stop(). */
  reports(): LoopReport[] {
    const end = this.endedAt || this.now();
    return this.loops.map((loop) => loop.report(end));
  }

  private async run(loop: Loop): Promise<void> {
    const perLoopRequests = this.options.requestsPerSecond ?? 40;
    const interval = 1000 / perLoopRequests;
    const timeoutMs = this.options.requestTimeoutMs ?? 5000;
    const maxBatch = this.options.maxBatch ?? 10_000;
    const maxRequests = Math.ceil((this.options.maxMs / interval) * 2) + 10;
    const deadline = this.now() + this.options.maxMs;
    let next = this.now();
    while (
      !this.stopping &&
      this.now() < deadline &&
      this.totalIds < this.options.maxIds &&
      loop.requests < maxRequests
    ) {
      // Average ids per request (one single, then three batches) that gives this loop its share.
      const share = this.idsPerSecond / this.loops.length / perLoopRequests;
      const batch = Math.max(2, Math.min(maxBatch, Math.round((4 * share - 1) / 3)));
      const got = await loop.once(batch, timeoutMs, () => this.now());
      this.totalIds += got;
      next += got > 0 ? interval : Math.max(interval, 50);
      const now = this.now();
      if (next < now - 1000) next = now;
      if (next > now) await sleep(next - now);
    }
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
