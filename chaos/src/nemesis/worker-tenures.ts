// The lease invariant of snowflake ids, checked on the ids themselves: for each snowflake space and
// worker id, two different server processes never issue ids dated in the same stretch of time. The
// next holder of a worker id starts after the previous holder's last timestamp (or its horizon),
// and a holder issues nothing past its fence, so the dates of one holder's ids and the next one's
// do not overlap, whether or not an id happens to repeat.
//
// A process is one start of a server (a restart is another process). A process may hold a worker
// id, lose it and take it again later after another process held it in between (a leased registry
// gives a lapsed holder whatever id is free), so a process's ids on one worker id are cut into
// tenures: a tenure ends at any failed answer of that process in that space, and, on a server of
// one process, at an answer with ids of another worker id. A process that lost its worker id and
// took it back has its clients refused or unanswered meanwhile (they ask every 50 ms; a stopped
// process makes them time out), so a cut falls between its two tenures. Cutting more than needed
// only weakens the check; a tenure spanning another process's is what the check reports.
//
// A server of several worker processes (`server.workers`) answers through any of them: its worker
// processes are told apart by the worker id each holds (each holds its own), and a worker process
// its primary started again is one process with its predecessor.
import { existsSync } from "node:fs";
import type { Layout } from "@leaf/core";
import { loadConfig } from "@leaf/server";
import type { Cluster } from "./cluster";
import type { Family } from "./families";
import type { Answer, History } from "./history";

/**
 * How the checker decodes snowflake ids: each server's layout, and whether a server is one process.
 */
export interface SnowflakeLayouts {
  /** The layout of each server that has snowflake on (by label). */
  layouts: ReadonlyMap<string, Layout>;
  /** Each server runs one process (not `server.workers`). */
  oneProcessPerServer: boolean;
}

/** One side of an overlap: a tenure of one process on the worker id. */
export interface TenureText {
  /** "B #1": the server and which start of it. */
  process: string;
  /** Dates of its first and last id, ms since the run began by the nemesis's wall clock. */
  fromMs: number;
  toMs: number;
  firstId: string;
  lastId: string;
  /** The answers that carried its first and its last id. */
  firstAnswer: Answer;
  lastAnswer: Answer;
  /** Its ids, and those dated inside the stretch both tenures cover. */
  ids: number;
  idsInOverlap: number;
}

/** Two processes that issued ids of one worker id dated in the same stretch of time. */
export interface Overlap {
  space: string;
  workerId: number;
  /** The tenure that began first, and the one whose first id is dated inside it. */
  earlier: TenureText;
  later: TenureText;
}

/** What the worker-id check found. */
export interface TenureVerdict {
  /** Tenures whose first id is dated inside another process's tenure of the same worker id. */
  overlaps: number;
  /** The overlap whose later tenure's first id was answered first. */
  firstOverlap: Overlap | undefined;
  /** Snowflake ids dated more than a day away from the run (a wrong layout, or a clock far off). */
  undated: number;
  firstUndated: string | undefined;
}

/** ms: ids dated further than this from the run decode with the wrong layout. */
const DAY_MS = 86_400_000;

interface Tenure {
  server: string;
  incarnation: number;
  workerId: number;
  firstMs: number;
  lastMs: number;
  firstId: bigint;
  lastId: bigint;
  firstAnswer: number;
  lastAnswer: number;
  ids: number;
  /**
   * Where each of its answers' ids start in the space's column (the ids of other worker ids
   * skipped).
   */
  offsets: number[];
}

/**
 * Each server's snowflake layout, read from the configuration file it was started with, resolved by
 * the server's own `loadConfig`. Servers never started, with snowflake off, or whose configuration
 * the server refuses have none. Read before the run folder is removed.
 */
export function snowflakeLayouts(cluster: Cluster, family: Family): SnowflakeLayouts {
  const layouts = new Map<string, Layout>();
  for (const { label } of family.servers) {
    const file = cluster.server(label).configFile;
    if (!existsSync(file)) continue;
    // A pod's name picks its ordinal, not its layout; a spare pod's is set only by a takeover.
    const env = { HOSTNAME: "leaf-0", ...cluster.envs.get(label) };
    let layout: Layout | undefined;
    try {
      layout = loadConfig({ file, env }).snowflake?.layout;
    } catch {
      // A configuration the server refuses (segment's E and F, `defaults-start`): it must not
      // start, and one that did breaks `refusals`; its ids are left to the duplicate check.
      continue;
    }
    if (layout) layouts.set(label, layout);
  }
  return { layouts, oneProcessPerServer: (family.workers ?? 1) === 1 };
}

/** Finds the ids of one worker id that two processes issued in the same stretch of time. */
export function checkTenures(history: History, snowflake: SnowflakeLayouts): TenureVerdict {
  const verdict: TenureVerdict = {
    overlaps: 0,
    firstOverlap: undefined,
    undated: 0,
    firstUndated: undefined,
  };
  let firstAnsweredMs = Infinity;
  for (const space of history.spaceNames()) {
    const tenures = tenuresOf(history, space, snowflake, verdict);
    const byWorker = new Map<number, Tenure[]>();
    for (const t of tenures) {
      const list = byWorker.get(t.workerId);
      if (list) list.push(t);
      else byWorker.set(t.workerId, [t]);
    }
    for (const list of byWorker.values()) {
      list.sort((a, b) => a.firstMs - b.firstMs);
      // Per process, its tenure reaching latest so far.
      const reach = new Map<string, Tenure>();
      for (const t of list) {
        const key = processOf(t);
        let inside: Tenure | undefined;
        for (const [other, earlier] of reach) {
          if (other !== key && earlier.lastMs >= t.firstMs) inside = earlier;
        }
        if (inside) {
          verdict.overlaps++;
          const answeredMs = history.answers[t.firstAnswer]!.toMs;
          if (answeredMs < firstAnsweredMs) {
            firstAnsweredMs = answeredMs;
            verdict.firstOverlap = describe(history, space, snowflake, inside, t);
          }
        }
        const best = reach.get(key);
        if (!best || t.lastMs > best.lastMs) reach.set(key, t);
      }
    }
  }
  return verdict;
}

function processOf(t: Tenure): string {
  return `${t.server} #${t.incarnation}`;
}

/** The tenures of every process in `space`, from the answers in the order they were recorded. */
function tenuresOf(
  history: History,
  space: string,
  snowflake: SnowflakeLayouts,
  verdict: TenureVerdict,
): Tenure[] {
  const { ids, answers } = history.idsOf(space);
  const tenures: Tenure[] = [];
  // Per process, its open tenure on each worker id.
  const open = new Map<string, Map<number, Tenure>>();
  const wall0 = history.wallMs0;
  const latest = history.now() + DAY_MS;
  let cursor = 0;
  for (let i = 0; i < history.answers.length; i++) {
    const a = history.answers[i]!;
    if (a.space !== space) continue;
    const key = `${a.server} #${a.incarnation}`;
    if (a.code !== undefined) {
      open.get(key)?.clear();
      continue;
    }
    const from = cursor;
    cursor += a.ids;
    if (a.ids > 0 && answers[from] !== i) {
      throw new Error(
        `[leaf] [nemesis] the ids of ${space} are out of step with its answers at ${i}`,
      );
    }
    const layout = snowflake.layouts.get(a.server);
    // A @leaf/client over several servers does not say which one answered.
    if (a.mode !== "snowflake" || a.server === "pool" || !layout) continue;
    let mine = open.get(key);
    if (!mine) {
      mine = new Map();
      open.set(key, mine);
    }
    const timeShift = BigInt(layout.timestampShift);
    const workerShift = BigInt(layout.workerShift);
    const workerMask = BigInt(layout.maxWorkerId);
    let last: Tenure | undefined;
    for (let k = from; k < cursor; k++) {
      const id = ids[k]!;
      const ms = layout.msAt(Number(id >> timeShift));
      const workerId = Number((id >> workerShift) & workerMask);
      if (ms - wall0 < -DAY_MS || ms - wall0 > latest) {
        verdict.undated++;
        verdict.firstUndated ??= `id ${id} from ${key} (${a.client}) decodes with layout ${layout.name} to ${new Date(ms).toISOString()}, worker id ${workerId}`;
      }
      let t = last?.workerId === workerId ? last : mine.get(workerId);
      if (!t) {
        // One process holds one worker id at a time (no backups in the nemesis; a backup id is a
        // tenure of its own, which only cuts more).
        if (snowflake.oneProcessPerServer) mine.clear();
        t = {
          server: a.server,
          incarnation: a.incarnation,
          workerId,
          firstMs: ms,
          lastMs: ms,
          firstId: id,
          lastId: id,
          firstAnswer: i,
          lastAnswer: i,
          ids: 0,
          offsets: [],
        };
        mine.set(workerId, t);
        tenures.push(t);
      }
      if (t.offsets[t.offsets.length - 1] !== from) t.offsets.push(from);
      t.ids++;
      if (ms < t.firstMs) {
        t.firstMs = ms;
        t.firstId = id;
        t.firstAnswer = i;
      }
      if (ms > t.lastMs || (ms === t.lastMs && id > t.lastId)) {
        t.lastMs = ms;
        t.lastId = id;
        t.lastAnswer = i;
      }
      last = t;
    }
  }
  return tenures;
}

/** Both tenures of an overlap, with their ids dated inside the stretch both cover. */
function describe(
  history: History,
  space: string,
  snowflake: SnowflakeLayouts,
  earlier: Tenure,
  later: Tenure,
): Overlap {
  const fromMs = later.firstMs;
  const toMs = Math.min(earlier.lastMs, later.lastMs);
  const text = (t: Tenure): TenureText => ({
    process: processOf(t),
    fromMs: t.firstMs - history.wallMs0,
    toMs: t.lastMs - history.wallMs0,
    firstId: t.firstId.toString(),
    lastId: t.lastId.toString(),
    firstAnswer: history.answers[t.firstAnswer]!,
    lastAnswer: history.answers[t.lastAnswer]!,
    ids: t.ids,
    idsInOverlap: datedBetween(history, space, snowflake, t, fromMs, toMs),
  });
  return { space, workerId: later.workerId, earlier: text(earlier), later: text(later) };
}

/** The ids of tenure `t` dated from `fromMs` to `toMs` (epoch ms). */
function datedBetween(
  history: History,
  space: string,
  snowflake: SnowflakeLayouts,
  t: Tenure,
  fromMs: number,
  toMs: number,
): number {
  const { ids, answers } = history.idsOf(space);
  const layout = snowflake.layouts.get(t.server)!;
  let n = 0;
  for (const offset of t.offsets) {
    const answer = answers[offset]!;
    for (let k = offset; k < ids.length && answers[k] === answer; k++) {
      const parts = layout.decompose(ids[k]!);
      if (
        parts.workerId === t.workerId &&
        parts.timestampMs >= fromMs &&
        parts.timestampMs <= toMs
      ) {
        n++;
      }
    }
  }
  return n;
}
