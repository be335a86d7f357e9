// The checker: reads a history and the faults' windows and finds what breaks a promise: an id twice
// in a space, ids of one worker id dated in the same stretch of time by two server processes
// (worker-tenures.ts), an id not above the previous one from the same server process (where the
// README promises it), an error code no active fault may cause; and reports the longest time each
// client went without an id.
import type { Effect } from "./faults/fault";
import { NO_ANSWER } from "./faults/fault";
import type { Answer, History } from "./history";
import { checkTenures, type Overlap, type SnowflakeLayouts } from "./worker-tenures";

/** When a fault was active and what it may cause meanwhile. */
export interface Window {
  step: number;
  fault: string;
  target: string;
  fromMs: number;
  /** When it was stopped (Infinity until then). */
  stoppedMs: number;
  /** When its codes stop being accepted (stop + settle; Infinity for a lasting change). */
  toMs: number;
  effects: Effect[];
}

/** A duplicate: one id, the two answers that carried it. */
export interface Duplicate {
  space: string;
  id: string;
  first: Answer;
  second: Answer;
}

/** What the checker found. */
export interface Verdict {
  ids: number;
  answers: number;
  failedAnswers: number;
  /** Extra copies of ids, per space. */
  duplicates: Record<string, number>;
  /** The duplicate whose second copy arrived first. */
  firstDuplicate: Duplicate | undefined;
  /** Tenures of a worker id whose first id is dated inside another process's tenure of it. */
  overlaps: number;
  firstOverlap: Overlap | undefined;
  /** Snowflake ids that decode to a date more than a day away from the run. */
  undated: number;
  firstUndated: string | undefined;
  decreases: number;
  firstDecrease: string | undefined;
  /** Error codes no active fault may cause: client, code, count, first time, a message. */
  undocumented: Array<{
    client: string;
    code: string;
    count: number;
    firstMs: number;
    message: string;
  }>;
  /** Per client: the longest time without an id, and the faults active meanwhile. */
  gaps: Array<{ client: string; ms: number; fromMs: number; toMs: number; during: string[] }>;
  /** Whether a promise was broken (duplicates, overlaps, decreases, undocumented codes). */
  failed: boolean;
  /**
   * Which promises: "duplicates", "worker-ids" (overlapping tenures), "dates", "decreases",
   * "codes", or one a fault saw ("refusals").
   */
  broken: string[];
}

/**
 * Checks a history against the windows of the faults applied and of servers left down; with
 * `snowflake` (each server's layout), also the tenures of each snowflake worker id.
 */
export function check(
  history: History,
  windows: Window[],
  down: Array<{ server: string; fromMs: number; toMs: number }>,
  brokenByFaults: Array<{ promise: string }> = [],
  snowflake?: SnowflakeLayouts,
): Verdict {
  const duplicates: Record<string, number> = {};
  let firstDuplicate: Duplicate | undefined;
  for (const space of history.spaceNames()) {
    const found = findDuplicates(history, space);
    if (found.count > 0) duplicates[space] = found.count;
    if (found.first && (!firstDuplicate || found.first.second.toMs < firstDuplicate.second.toMs)) {
      firstDuplicate = found.first;
    }
  }
  const tenures = snowflake
    ? checkTenures(history, snowflake)
    : { overlaps: 0, firstOverlap: undefined, undated: 0, firstUndated: undefined };
  const undocumented = new Map<
    string,
    { client: string; code: string; count: number; firstMs: number; message: string }
  >();
  let failedAnswers = 0;
  const accepting = [...windows, ...outlasting(windows)];
  for (const answer of history.answers) {
    if (answer.code === undefined) continue;
    failedAnswers++;
    if (accepted(answer, accepting, down)) continue;
    const key = `${answer.client} ${answer.code}`;
    const entry = undocumented.get(key);
    if (entry) entry.count++;
    else {
      undocumented.set(key, {
        client: answer.client,
        code: answer.code,
        count: 1,
        firstMs: Math.round(answer.fromMs),
        message: history.messages.get(key) ?? "",
      });
    }
  }
  const d = history.decreases[0];
  const broken = [
    ...(Object.keys(duplicates).length > 0 ? ["duplicates"] : []),
    ...(tenures.overlaps > 0 ? ["worker-ids"] : []),
    ...(tenures.undated > 0 ? ["dates"] : []),
    ...(history.decreases.length > 0 ? ["decreases"] : []),
    ...(undocumented.size > 0 ? ["codes"] : []),
    ...new Set(brokenByFaults.map((b) => b.promise)),
  ];
  return {
    ids: history.totalIds(),
    answers: history.answers.length,
    failedAnswers,
    duplicates,
    firstDuplicate,
    ...tenures,
    decreases: history.decreases.length,
    firstDecrease: d
      ? `${d.client} from ${d.server} #${d.incarnation}: ${d.previous} then ${d.id} at ${(history.answers[d.answer]!.toMs / 1000).toFixed(1)} s`
      : undefined,
    undocumented: [...undocumented.values()],
    gaps: gaps(history, windows),
    failed: broken.length > 0,
    broken,
  };
}

/**
 * What keeps servers from their store: a link cut, a store paused or killed, and a stall of the
 * server's own event loop (stalls.ts: a server that runs nothing reads nothing, and a query it sent
 * meanwhile may end only by its own timeout once it runs again).
 */
const STORE_OUTAGES = new Set(["link-cut", "store-pause", "store-kill", "residue-outage", "stall"]);

/**
 * Codes a server answers from what it knows of itself, never from what it last read of its store
 * (it is down or stopping, its own clock is behind): they end with their fault, whatever the store.
 */
const OWN_CODES = new Set([
  ...NO_ANSWER,
  "SHUTTING_DOWN",
  "CLOSED",
  "CLOCK_MOVED_BACKWARDS",
  "CLOCK_BEHIND",
]);

/** Outages a fault's codes are carried through, one after another (a cut, then a stall). */
const CHAINED_OUTAGES = 2;

/**
 * A fault's codes may outlast it on a server that could not reach its store when it ended: the
 * server learns that the fault is over (a max id put back, a tag created again, a stepped clock
 * stored by a renewal) only at its next read or write of the store, and keeps answering what it
 * last read until then (a tag refused below its high-water mark stays refused until its row is read
 * again; segment README). So for each fault window (not an outage: an outage's own codes are
 * accepted through every later outage's window anyway) whose end an outage overlaps, a window of its
 * codes but OWN_CODES, for the servers the outage keeps away, from the window's end to the outage's
 * own end and settle; and through a second outage that overlaps that end in turn (seed 2711: a cut,
 * then a stall of the server just after the heal). Bounded at CHAINED_OUTAGES: a server that runs
 * between short stalls for longer than one refresh is expected to read its store, and a chain
 * without bound would carry a refusal to the end of a run on a machine that stalls every few
 * seconds.
 */
function outlasting(windows: Window[]): Window[] {
  const outages = windows.filter((w) => STORE_OUTAGES.has(w.fault));
  const extended: Window[] = [];
  const seen = new Set<string>();
  // Each chain: the fault window it started from, and where (and for whom) it ends so far.
  let chains = windows.flatMap((root, index) => {
    if (STORE_OUTAGES.has(root.fault)) return [];
    const effects = root.effects
      .map((e) => ({ ...e, codes: e.codes.filter((code) => !OWN_CODES.has(code)) }))
      .filter((e) => e.codes.length > 0);
    return effects.length > 0 ? [{ root, index, toMs: root.toMs, effects }] : [];
  });
  for (let depth = 0; depth < CHAINED_OUTAGES && chains.length > 0; depth++) {
    const next: typeof chains = [];
    for (const chain of chains) {
      for (const [o, outage] of outages.entries()) {
        if (outage.fromMs > chain.toMs || outage.toMs <= chain.toMs) continue;
        const away = outage.effects.flatMap((e) => e.servers);
        const effects = chain.effects
          .map((e) => ({
            ...e,
            servers: away.includes("*")
              ? e.servers
              : e.servers
                  .filter((s) => s === "*" || away.includes(s))
                  .flatMap((s) => (s === "*" ? away : [s])),
          }))
          .filter((e) => e.servers.length > 0);
        if (effects.length === 0) continue;
        // One window per fault, outage and servers kept away: it runs from the fault's own end
        // (the chain is unbroken from there) to the outage's, whichever way the chain came.
        const key = `${chain.index} ${o} ${JSON.stringify(effects.map((e) => e.servers))}`;
        if (seen.has(key)) continue;
        seen.add(key);
        next.push({ root: chain.root, index: chain.index, toMs: outage.toMs, effects });
        extended.push({ ...chain.root, fromMs: chain.root.toMs, toMs: outage.toMs, effects });
      }
    }
    chains = next;
  }
  return extended;
}

/** Whether a failed answer's code is one an active fault (or a server left down) may cause. */
function accepted(
  answer: Answer,
  windows: Window[],
  down: Array<{ server: string; fromMs: number; toMs: number }>,
): boolean {
  const code = answer.code!;
  const overlapping = windows.filter((w) => w.fromMs <= answer.toMs && answer.fromMs <= w.toMs);
  const effects = overlapping.flatMap((w) => w.effects);
  if (answer.server === "pool") {
    // A client over every server: UNAVAILABLE or TIMEOUT when every server failed, or a server's
    // code.
    if (overlapping.length > 0 && (code === "UNAVAILABLE" || code === "TIMEOUT")) return true;
    return effects.some(
      (e) =>
        e.codes.includes(code) &&
        (e.outage === undefined || e.servers.some((server) => allDown(effects, server, e.outage!))),
    );
  }
  if (
    NO_ANSWER.includes(code) &&
    down.some(
      (d) => d.server === answer.server && d.fromMs <= answer.toMs && answer.fromMs <= d.toMs,
    )
  ) {
    return true;
  }
  return effects.some(
    (e) =>
      (e.servers.includes("*") || e.servers.includes(answer.server)) &&
      e.codes.includes(code) &&
      (e.outage === undefined || allDown(effects, answer.server, e.outage)),
  );
}

/**
 * Whether `effects` (active at once) take every database of a residue set away from `server` ("*":
 * from every server): one database down is served through, so its codes need the others down too.
 */
function allDown(
  effects: Effect[],
  server: string,
  outage: NonNullable<Effect["outage"]>,
): boolean {
  const down = new Set(
    effects
      .filter(
        (e) =>
          e.outage !== undefined &&
          (e.servers.includes("*") || e.servers.includes(server) || server === "*"),
      )
      .map((e) => e.outage!.database),
  );
  return outage.of.every((database) => down.has(database));
}

/** Sorts a copy of the space's ids; counts extra copies; finds the duplicate seen earliest. */
function findDuplicates(
  history: History,
  space: string,
): { count: number; first: Duplicate | undefined } {
  const { ids, answers } = history.idsOf(space);
  const sorted = ids.slice().sort();
  let count = 0;
  const values = new Set<bigint>();
  for (let i = 1; i < sorted.length; i++) {
    if (sorted[i] === sorted[i - 1]) {
      count++;
      if (values.size < 10_000) values.add(sorted[i]!);
    }
  }
  if (count === 0) return { count, first: undefined };
  // Each duplicated id's answers, in arrival order; the pair whose second copy came first.
  const seen = new Map<bigint, number>();
  for (let i = 0; i < ids.length; i++) {
    const id = ids[i]!;
    if (!values.has(id)) continue;
    const earlier = seen.get(id);
    if (earlier === undefined) {
      seen.set(id, answers[i]!);
      continue;
    }
    return {
      count,
      first: {
        space,
        id: id.toString(),
        first: history.answers[earlier]!,
        second: history.answers[answers[i]!]!,
      },
    };
  }
  return { count, first: undefined };
}

/** Per client, the longest time from the start of a request that got no id to the next id. */
function gaps(history: History, windows: Window[]): Verdict["gaps"] {
  const open = new Map<string, number>();
  const longest = new Map<string, { ms: number; fromMs: number; toMs: number }>();
  const end = history.now();
  const consider = (client: string, fromMs: number, toMs: number) => {
    const best = longest.get(client);
    if (!best || toMs - fromMs > best.ms) longest.set(client, { ms: toMs - fromMs, fromMs, toMs });
  };
  for (const a of history.answers) {
    if (a.code !== undefined) {
      if (!open.has(a.client)) open.set(a.client, a.fromMs);
      continue;
    }
    const since = open.get(a.client) ?? a.fromMs;
    open.delete(a.client);
    consider(a.client, since, a.toMs);
  }
  for (const [client, since] of open) consider(client, since, end);
  return [...longest.entries()]
    .map(([client, g]) => ({
      client,
      ms: Math.round(g.ms),
      fromMs: Math.round(g.fromMs),
      toMs: Math.round(g.toMs),
      during: windows
        .filter((w) => w.fromMs <= g.toMs && g.fromMs <= w.toMs)
        .map((w) => `#${w.step} ${w.fault} ${w.target}`),
    }))
    .sort((a, b) => b.ms - a.ms);
}

/** Ids answered by `server` (any start of it) between `fromMs` and `toMs`. */
export function idsFrom(history: History, server: string, fromMs: number, toMs: number): number {
  let n = 0;
  for (const a of history.answers) {
    if (a.server === server && a.code === undefined && a.toMs >= fromMs && a.fromMs <= toMs) {
      n += a.ids;
    }
  }
  return n;
}
