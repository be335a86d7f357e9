// Capacity nobody else watches: the years left in the snowflake layout, the worker ids left in the
// registry's space, and each segment tag's headroom below max_id 2^63 - 1 (in days at the current
// rate: this node's, or the store's max_id growth when faster). Shown on the monitor page and in
// the metrics, and logged as warnings at start and then hourly while they hold.
import { MAX_ID } from "@leaf/segment";
import { type Activity, LONG_RATE_SECONDS } from "./activity";
import { registryBackend } from "./backends/index";
import type { ServerView, ServiceLogger } from "./service-types";

/** Warn when the layout, or a tag's max_id headroom at its current rate, lasts fewer years. */
export const WARN_YEARS = 5;
/** Warn when fewer than this fraction of the worker-id space is left (never-reused ids). */
export const WARN_WORKER_FRACTION = 0.1;
/** How often capacity is re-read (the store's max ids) and checked. */
export const CHECK_INTERVAL_MS = 60_000;
/** A warning that still holds is logged again after this long. */
export const REPEAT_MS = 3_600_000;
/** The store's max_id growth is measured over at most this long (the samples of one hour). */
export const STORE_RATE_WINDOW_MS = 3_600_000;
/** ... and over at least this long: a range taken just now says little about the rate. */
export const STORE_RATE_MIN_SPAN_MS = 30_000;

const DAY_SECONDS = 24 * 3600;
const YEAR_SECONDS = 365.25 * DAY_SECONDS;

/** One capacity warning. */
export interface CapacityWarning {
  /** What it is about: `layout`, `worker-ids`, `max-id:<tag>`. */
  subject: string;
  message: string;
}

/** The snowflake layout's end. */
export interface LayoutCapacity {
  name: string;
  /** ms since 1970 of the layout's last instant: no id can be made after it. */
  lastInstantMs: number;
  secondsLeft: number;
  yearsLeft: number;
}

/** The registry's worker-id space. */
export interface WorkerIdCapacity {
  registry: string;
  /**
   * The registry's mode (its entry's): normal, recycle (zk); fixed, lease (mysql); lease (postgres,
   * redis, etcd); configured (local).
   */
  mode: string;
  /** Worker ids the layout holds: 2^workerBits. */
  space: number;
  /**
   * False when the registry never gives an id back (zk normal, mysql fixed): every new node uses
   * one up.
   */
  reused: boolean;
  /** Highest worker id this node holds (primary or backup); null without a lease. */
  highestHeld: number | null;
  /**
   * Never-reused ids are handed out in increasing order, so at most `space - 1 - highestHeld` are
   * left; the node that joined last holds the highest id, so the smallest value over all nodes is
   * exact. Null when ids are reused or configured by hand.
   */
  left: number | null;
  /** The setting that would make the registry give ids back, when it has one. */
  instead?: string;
}

/** A segment tag's room. */
export interface TagCapacity {
  tag: string;
  /**
   * The store's max_id as last read, or the end of this node's last range when higher (decimal).
   */
  maxId: string;
  /** Ids left below 2^63 - 1 (decimal). */
  headroom: string;
  /**
   * The rate the headroom is judged at, ids per second: the higher of this node's rate and the
   * store's max_id growth (every node's ranges together).
   */
  idsPerSecond: number;
  /** Ids per second this node issued over the last minute. */
  nodeIdsPerSecond: number;
  /**
   * How fast the store's max_id grew over the last hour of reads (at least 30 s of them), in ids
   * per second; null until then. Ranges are counted when taken, so it runs ahead of the ids used.
   */
  storeIdsPerSecond: number | null;
  /** Ids left in this node's two ranges (decimal). */
  bufferIdsLeft: string;
  /** Seconds until both ranges run out at that rate; null when idle. */
  bufferSecondsLeft: number | null;
  /** Years until max_id reaches 2^63 - 1 at that rate; null when idle. */
  headroomYears: number | null;
  /** The same in days; null when idle. */
  headroomDays: number | null;
  /** The tag is used up: no range of its step fits below 2^63 - 1 (requests get TAG_EXHAUSTED). */
  usedUp: boolean;
}

/** Everything capacity, as the monitor's JSON carries it. */
export interface CapacityView {
  layout: LayoutCapacity | null;
  workerIds: WorkerIdCapacity | null;
  tags: TagCapacity[];
  warnings: CapacityWarning[];
  thresholds: { years: number; workerFraction: number };
}

/**
 * Reads the store's max ids now and then, computes capacity from the running services, and logs
 * its warnings. Bound to a server by {@link bind}; its timer runs between {@link start} and
 * {@link stop}.
 */
export class CapacityWatch {
  /** The store's max_id per tag as last read. */
  private readonly storeMaxIds = new Map<string, bigint>();
  /**
   * The store's max_id per tag at each read of the last {@link STORE_RATE_WINDOW_MS}, oldest first.
   */
  private readonly storeSamples = new Map<string, Array<{ at: number; maxId: bigint }>>();
  private readonly logged = new Map<string, number>();
  private ctx: ServerView | undefined;
  private logger: ServiceLogger | undefined;
  private timer: NodeJS.Timeout | undefined;
  private checking: Promise<CapacityView> | undefined;

  constructor(private readonly activity: Activity) {}

  /** The server whose capacity is watched, and where warnings go. */
  bind(ctx: ServerView, logger: ServiceLogger): void {
    this.ctx = ctx;
    this.logger = logger;
  }

  /** Checks now (the start-up warnings), then every {@link CHECK_INTERVAL_MS}. */
  start(): void {
    if (this.timer) return;
    this.timer = setInterval(() => void this.check(), CHECK_INTERVAL_MS);
    this.timer.unref();
    void this.check();
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  /**
   * Re-reads the store's max ids, computes capacity and logs each warning that was not logged in
   * the last {@link REPEAT_MS}. What the timer runs; never rejects.
   */
  check(now = Date.now()): Promise<CapacityView> {
    this.checking ??= this.refresh(now)
      .then(() => {
        const view = this.view(now);
        for (const warning of view.warnings) {
          const last = this.logged.get(warning.subject);
          if (last !== undefined && now - last < REPEAT_MS) continue;
          this.logged.set(warning.subject, now);
          this.logger?.warn({ capacity: warning.subject }, warning.message);
        }
        return view;
      })
      .finally(() => {
        this.checking = undefined;
      });
    return this.checking;
  }

  /** Capacity now, from the services and the last max ids read. */
  view(now = Date.now()): CapacityView {
    const ctx = this.ctx;
    const warnings: CapacityWarning[] = [];
    const view: CapacityView = {
      layout: null,
      workerIds: null,
      tags: [],
      warnings,
      thresholds: { years: WARN_YEARS, workerFraction: WARN_WORKER_FRACTION },
    };
    if (!ctx) return view;
    const snowflake = ctx.config.snowflake;
    if (snowflake) {
      const { layout } = snowflake;
      const secondsLeft = Math.max(0, (layout.lastInstantMs - now) / 1000);
      view.layout = {
        name: layout.name,
        lastInstantMs: layout.lastInstantMs,
        secondsLeft,
        yearsLeft: secondsLeft / YEAR_SECONDS,
      };
      if (view.layout.yearsLeft < WARN_YEARS) {
        warnings.push({
          subject: "layout",
          message:
            `[leaf] [server] capacity: snowflake layout ${layout.name} runs out on ` +
            `${utc(layout.lastInstantMs)}, in ${years(view.layout.yearsLeft)}; ` +
            "after that no snowflake id can be made. Plan the move to a layout with a later epoch " +
            "(snowflake.epoch) or more timestamp bits",
        });
      }
      view.workerIds = this.workerIds(ctx);
      const w = view.workerIds;
      if (w.left !== null && w.left < Math.ceil(w.space * WARN_WORKER_FRACTION)) {
        warnings.push({
          subject: "worker-ids",
          message:
            `[leaf] [server] capacity: ${w.left} of ${w.space} worker ids left in the ${w.registry} ` +
            `registry (${w.mode} mode never gives an id back; this node holds ${w.highestHeld}). ` +
            `Every new ip:port uses one up; when none is left new nodes cannot start. Move to ` +
            `${w.instead ?? "a registry that recycles ids"} ` +
            "(ids recycled) or a layout with more worker bits",
        });
      }
    }
    const segment = ctx.services?.segment;
    if (segment) {
      for (const snap of segment.generator.snapshots()) {
        let maxId = this.storeMaxIds.get(snap.tag) ?? 0n;
        if (snap.heldEnd !== null && snap.heldEnd > maxId) maxId = snap.heldEnd;
        const headroom = maxId >= MAX_ID ? 0n : MAX_ID - maxId;
        const nodeRate = this.activity.idsPerSecond("segment", snap.tag, LONG_RATE_SECONDS);
        const storeRate = this.storeRate(snap.tag);
        const rate = Math.max(nodeRate, storeRate ?? 0);
        const usedUp = snap.refused?.reason === "exhausted";
        const seconds = usedUp ? 0 : rate > 0 ? Number(headroom) / rate : null;
        const tag: TagCapacity = {
          tag: snap.tag,
          maxId: maxId.toString(),
          headroom: headroom.toString(),
          idsPerSecond: rate,
          nodeIdsPerSecond: nodeRate,
          storeIdsPerSecond: storeRate,
          bufferIdsLeft: snap.idsLeft.toString(),
          bufferSecondsLeft: nodeRate > 0 ? Number(snap.idsLeft) / nodeRate : null,
          headroomYears: seconds === null ? null : seconds / YEAR_SECONDS,
          headroomDays: seconds === null ? null : seconds / DAY_SECONDS,
          usedUp,
        };
        view.tags.push(tag);
        const subject = `max-id:${snap.tag}`;
        if (usedUp) {
          warnings.push({
            subject,
            message:
              `[leaf] [server] capacity: tag ${JSON.stringify(snap.tag)} is used up: no range of its ` +
              `step fits below max_id 2^63 - 1 (max_id ${tag.maxId}, ${tag.headroom} ids left). Its ` +
              "requests get TAG_EXHAUSTED (410, Leaf code -3) once this node's last ids are handed " +
              "out: move its callers to a new tag",
          });
        } else if (tag.headroomYears !== null && tag.headroomYears < WARN_YEARS) {
          const source =
            storeRate !== null && storeRate > nodeRate
              ? `the store's max_id growth of ${storeRate.toFixed(1)} ids/s (all nodes)`
              : `this node's ${nodeRate.toFixed(1)} ids/s`;
          warnings.push({
            subject,
            message:
              `[leaf] [server] capacity: tag ${JSON.stringify(snap.tag)} has ${tag.headroom} ids ` +
              `left below max_id 2^63 - 1 (max_id ${tag.maxId}); at ${source} ` +
              `they last ${days(tag.headroomDays!)}. After that the tag refuses ranges ` +
              "(TAG_EXHAUSTED): move its callers to a new tag",
          });
        }
      }
    }
    return view;
  }

  /** The store's max_id growth of `tag` in ids per second, or null without enough reads. */
  private storeRate(tag: string): number | null {
    const samples = this.storeSamples.get(tag);
    if (samples === undefined || samples.length < 2) return null;
    const first = samples[0]!;
    const last = samples[samples.length - 1]!;
    const span = last.at - first.at;
    if (span < STORE_RATE_MIN_SPAN_MS) return null;
    return Number(last.maxId - first.maxId) / (span / 1000);
  }

  private workerIds(ctx: ServerView): WorkerIdCapacity {
    const settings = ctx.config.snowflake!;
    const entry = registryBackend(settings.registry.kind);
    const { mode } = entry.describe(settings.registry);
    const { reused, configured, instead } = entry.reuse(settings.registry);
    const space = settings.layout.maxWorkerId + 1;
    const worker = ctx.services?.snowflake?.worker;
    let highestHeld: number | null = null;
    if (worker?.lease) {
      highestHeld = worker.lease.workerId;
      for (const backup of worker.lease.backups) {
        highestHeld = Math.max(highestHeld, backup.workerId);
      }
    }
    const left =
      !reused && !configured && highestHeld !== null ? Math.max(0, space - 1 - highestHeld) : null;
    return { registry: entry.kind, mode, space, reused, highestHeld, left, instead };
  }

  private async refresh(now: number): Promise<void> {
    const segment = this.ctx?.services?.segment;
    if (!segment) return;
    try {
      for (const row of await segment.store.describeTags()) {
        this.storeMaxIds.set(row.tag, row.maxId);
        const samples = this.storeSamples.get(row.tag) ?? [];
        this.storeSamples.set(row.tag, samples);
        // A max_id below the last read (the tag re-created lower) starts the measure again.
        if (samples.length > 0 && row.maxId < samples[samples.length - 1]!.maxId)
          samples.length = 0;
        samples.push({ at: now, maxId: row.maxId });
        while (samples.length > 2 && now - samples[1]!.at >= STORE_RATE_WINDOW_MS) samples.shift();
      }
    } catch {
      // Counted by the instrumented store and shown as its state; the last values stay.
    }
  }
}

/** `2079-09-07 15:47:35.551 UTC`: the monitor page's time format. */
function utc(ms: number): string {
  const iso = new Date(ms).toISOString();
  return `${iso.slice(0, 10)} ${iso.slice(11, 23)} UTC`;
}

/** "1,234 days (3.4 years)", "41 days", "5 hours": headroom as operators plan it, in days. */
export function days(value: number): string {
  if (value < 1) return `${Math.max(0, Math.floor(value * 24))} hours`;
  const whole = Math.floor(value);
  return value >= 365.25 ? `${whole} days (${(value / 365.25).toFixed(1)} years)` : `${whole} days`;
}

/** "3.2 years", "41 days", "5 hours". */
export function years(value: number): string {
  if (value >= 1) return `${value.toFixed(1)} years`;
  const days = value * 365.25;
  if (days >= 1) return `${Math.floor(days)} days`;
  return `${Math.max(0, Math.floor(days * 24))} hours`;
}
