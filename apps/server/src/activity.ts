// Motion for the monitor page: once a second the counters of ids, requests and errors are read and
// the differences kept for five minutes, so the page can draw rates, sparklines and recent errors
// without Prometheus. The request path only bumps plain numbers; all the work is in `sample()`.

/** Seconds of per-second samples kept: the error window and the longest rate window. */
export const KEEP_SECONDS = 300;
/** Seconds drawn in a sparkline. */
export const SPARKLINE_SECONDS = 120;
/** Window of the "now" rates (ids/s, requests/s). */
export const RATE_SECONDS = 10;
/** Window of the rate that time-left figures use: steadier than the "now" rate. */
export const LONG_RATE_SECONDS = 60;

/** Reads a cumulative count. */
type Reader = () => number;

/** One counter's per-second differences, newest last, in a ring. */
class Series {
  private readonly ring = new Float64Array(KEEP_SECONDS);
  private head = 0;
  /** Samples taken (capped at the ring's size). */
  private filled = 0;
  private last: number;
  /** ms since 1970 of the last non-zero difference; 0 when none. */
  lastActiveAt = 0;

  constructor(private readonly read: Reader) {
    this.last = read();
  }

  sample(now: number): void {
    const value = this.read();
    const delta = Math.max(0, value - this.last);
    this.last = value;
    this.ring[this.head] = delta;
    this.head = (this.head + 1) % KEEP_SECONDS;
    if (this.filled < KEEP_SECONDS) this.filled++;
    if (delta > 0) this.lastActiveAt = now;
  }

  /** Sum of the last `seconds` samples. */
  sum(seconds: number): number {
    let total = 0;
    const n = Math.min(seconds, this.filled);
    for (let i = 1; i <= n; i++) total += this.ring[(this.head - i + KEEP_SECONDS) % KEEP_SECONDS]!;
    return total;
  }

  /** Average per second over the last `seconds` (or over the samples there are, when fewer). */
  rate(seconds: number): number {
    const n = Math.min(seconds, this.filled);
    return n === 0 ? 0 : this.sum(n) / n;
  }

  /** The last `seconds` samples, oldest first, zeros before the first sample. */
  history(seconds: number): number[] {
    const out = new Array<number>(seconds).fill(0);
    const n = Math.min(seconds, this.filled);
    for (let i = 1; i <= n; i++) {
      out[seconds - i] = this.ring[(this.head - i + KEEP_SECONDS) % KEEP_SECONDS]!;
    }
    return out;
  }
}

/** What the monitor shows of one mode or tag. */
export interface ActivityRow {
  mode: string;
  /** Segment tag or redis namespace; "" for a mode's total and for snowflake. */
  tag: string;
  idsPerSecond: number;
  requestsPerSecond: number;
  /** Ids per second over the last minute, the rate time-left figures use. */
  idsPerSecondMinute: number;
  /** Ids per second for each of the last {@link SPARKLINE_SECONDS} seconds, oldest first. */
  ids: number[];
  requests: number[];
}

/** Errors of one code over the last {@link KEEP_SECONDS} seconds. */
export interface RecentErrors {
  /** The error code (`UNKNOWN_TAG`, ...), or `HTTP 404` for an answer outside the id endpoints. */
  code: string;
  /** The id mode, or null outside the id endpoints. */
  mode: string | null;
  count: number;
  /** ms since 1970 of the last second with one; null when none in the window. */
  lastAt: number | null;
  /** Errors per second over the sparkline window, oldest first. */
  history: number[];
}

/** What {@link Activity.view} answers. */
export interface ActivityView {
  /** Seconds a sparkline covers; one sample a second. */
  sparklineSeconds: number;
  rateSeconds: number;
  errorWindowSeconds: number;
  /** One row per mode that issued or was asked for ids, totals of its tags. */
  modes: ActivityRow[];
  /** One row per segment tag and redis namespace. */
  tags: ActivityRow[];
  errors: RecentErrors[];
}

/** A count bumped on the request path. */
export interface Counted {
  n: number;
}

/**
 * Per-second history of what the server does. Counters are registered by key; `sample()` (once a
 * second, from a timer the server starts) turns them into rates.
 */
export class Activity {
  private readonly ids = new Map<string, { mode: string; tag: string; series: Series }>();
  private readonly requests = new Map<
    string,
    { mode: string; tag: string; count: Counted; series: Series }
  >();
  private readonly errors = new Map<
    string,
    { mode: string | null; code: string; count: Counted; series: Series }
  >();
  private timer: NodeJS.Timeout | undefined;
  private sampled = 0;

  /** Follows a cumulative count of ids issued for `mode` and `tag` (read at each sample). */
  followIds(mode: string, tag: string, read: Reader): void {
    const key = `${mode}\u0000${tag}`;
    if (!this.ids.has(key)) this.ids.set(key, { mode, tag, series: new Series(read) });
  }

  /** Counts one answered id request (`tag` "" when it is not known to be a served tag). */
  request(mode: string, tag: string): void {
    this.requestCount(mode, tag).n++;
  }

  /**
   * The count of answered id requests of `mode` and `tag`, for a caller that keeps it and bumps
   * `n` once per answer (no lookup per request).
   */
  requestCount(mode: string, tag: string): Counted {
    const key = `${mode}\u0000${tag}`;
    let entry = this.requests.get(key);
    if (entry === undefined) {
      const count = { n: 0 };
      entry = { mode, tag, count, series: new Series(() => count.n) };
      this.requests.set(key, entry);
    }
    return entry.count;
  }

  /** Counts one error answer. */
  error(mode: string | null, code: string): void {
    const key = `${mode ?? ""}\u0000${code}`;
    let entry = this.errors.get(key);
    if (entry === undefined) {
      const count = { n: 0 };
      entry = { mode, code, count, series: new Series(() => count.n) };
      this.errors.set(key, entry);
    }
    entry.count.n++;
  }

  /** Takes one sample of every counter: call once a second. */
  sample(now = Date.now()): void {
    this.sampled = now;
    for (const e of this.ids.values()) e.series.sample(now);
    for (const e of this.requests.values()) e.series.sample(now);
    for (const e of this.errors.values()) e.series.sample(now);
  }

  /** Samples every second until {@link stop} (the timer does not keep the process alive). */
  start(): void {
    if (this.timer) return;
    this.timer = setInterval(() => this.sample(), 1000);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  /** ms since 1970 of the last sample; 0 before the first. */
  get lastSampleAt(): number {
    return this.sampled;
  }

  /** Ids per second of `mode`/`tag` over the last `seconds`; 0 when unknown. */
  idsPerSecond(mode: string, tag: string, seconds = LONG_RATE_SECONDS): number {
    return this.ids.get(`${mode}\u0000${tag}`)?.series.rate(seconds) ?? 0;
  }

  /** Rates, sparklines and recent errors. */
  view(): ActivityView {
    const rows = new Map<string, ActivityRow>();
    const modes = new Map<string, ActivityRow>();
    const row = (map: Map<string, ActivityRow>, mode: string, tag: string): ActivityRow => {
      const key = `${mode}\u0000${tag}`;
      let r = map.get(key);
      if (r === undefined) {
        r = {
          mode,
          tag,
          idsPerSecond: 0,
          requestsPerSecond: 0,
          idsPerSecondMinute: 0,
          ids: new Array<number>(SPARKLINE_SECONDS).fill(0),
          requests: new Array<number>(SPARKLINE_SECONDS).fill(0),
        };
        map.set(key, r);
      }
      return r;
    };
    const add = (target: number[], from: number[]) => {
      for (let i = 0; i < target.length; i++) target[i]! += from[i]!;
    };
    for (const { mode, tag, series } of this.ids.values()) {
      const history = series.history(SPARKLINE_SECONDS);
      const total = row(modes, mode, "");
      total.idsPerSecond += series.rate(RATE_SECONDS);
      total.idsPerSecondMinute += series.rate(LONG_RATE_SECONDS);
      add(total.ids, history);
      if (mode === "snowflake") continue;
      const r = row(rows, mode, tag);
      r.idsPerSecond = series.rate(RATE_SECONDS);
      r.idsPerSecondMinute = series.rate(LONG_RATE_SECONDS);
      r.ids = history;
    }
    for (const { mode, tag, series } of this.requests.values()) {
      const history = series.history(SPARKLINE_SECONDS);
      const total = row(modes, mode, "");
      total.requestsPerSecond += series.rate(RATE_SECONDS);
      add(total.requests, history);
      if (tag === "" || mode === "snowflake") continue;
      const r = row(rows, mode, tag);
      r.requestsPerSecond = series.rate(RATE_SECONDS);
      r.requests = history;
    }
    const errors: RecentErrors[] = [];
    for (const { mode, code, series } of this.errors.values()) {
      const count = series.sum(KEEP_SECONDS);
      if (count === 0) continue;
      errors.push({
        code,
        mode,
        count,
        lastAt: series.lastActiveAt || null,
        history: series.history(SPARKLINE_SECONDS),
      });
    }
    errors.sort((a, b) => b.count - a.count || a.code.localeCompare(b.code));
    const order = (a: ActivityRow, b: ActivityRow) =>
      a.mode.localeCompare(b.mode) || a.tag.localeCompare(b.tag);
    return {
      sparklineSeconds: SPARKLINE_SECONDS,
      rateSeconds: RATE_SECONDS,
      errorWindowSeconds: KEEP_SECONDS,
      modes: [...modes.values()].sort(order),
      tags: [...rows.values()].sort(order),
      errors,
    };
  }
}
