// Prometheus metrics (prom-client). The id paths only bump plain counters; the registry reads
// them, and the generators' state, when it is scraped, so that metrics cost the hot path nothing.
// The same counters feed the monitor's per-second activity, and the capacity watch its warnings.
import { type Layout, layouts, type SnowflakeWorker } from "@leaf/core";
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from "prom-client";
import { Activity } from "./activity";
import { type CapacityView, CapacityWatch } from "./capacity";
import { configSummary } from "./config-summary";
import { InstrumentedStore } from "./instrumented-store";
import type { LeafServices, ServerView, ServiceLogger } from "./service-types";

/** A counter bumped on the hot path: a plain number read at scrape time. */
export interface Tally {
  n: number;
}

/**
 * The snowflake ids counter, which also counts sequence-overflow waits: an id with the highest
 * sequence of its tick used the tick up, and the next id asked for within that tick waits for the
 * next one. `before()` is called before each request for ids, `issued()` after.
 */
export class SnowflakeTally implements Tally {
  n = 0;
  /** Ids that waited for the next tick because their tick's sequence was used up. */
  overflowWaits = 0;
  private readonly mask: bigint;
  private readonly shift: bigint;
  /** Tick whose sequence the last id used up; -1 when it did not. */
  private usedUpTick = -1;

  constructor(private readonly layout: Layout) {
    this.mask = BigInt(layout.maxSequence);
    this.shift = BigInt(layout.timestampShift);
  }

  /** Before asking for ids: a wait follows when the last id used its tick up and it is still that tick. */
  before(): void {
    if (this.usedUpTick < 0) return;
    if (this.layout.ticksAt(Date.now()) <= this.usedUpTick) this.overflowWaits++;
    this.usedUpTick = -1;
  }

  /** After one id was issued. */
  issued(id: bigint): void {
    this.n++;
    if ((id & this.mask) === this.mask) this.usedUpTick = Number(id >> this.shift);
  }

  /** After a batch: inside it, every id after a used-up tick waited for the next tick. */
  issuedAll(ids: readonly bigint[]): void {
    this.n += ids.length;
    const last = ids.length - 1;
    for (let i = 0; i < last; i++) if ((ids[i]! & this.mask) === this.mask) this.overflowWaits++;
    if (last >= 0 && (ids[last]! & this.mask) === this.mask) {
      this.usedUpTick = Number(ids[last]! >> this.shift);
    }
  }
}

/** A labelled counter the monitor reads too: Prometheus's counter plus plain totals per label set. */
export class CountedEvents<L extends string> {
  private readonly totals = new Map<string, number>();

  constructor(
    private readonly counter: Counter<L>,
    private readonly key: L,
    private readonly also?: (labels: Record<L, string>) => void,
  ) {}

  inc(labels: Record<L, string>): void {
    this.counter.inc(labels);
    const k = labels[this.key];
    this.totals.set(k, (this.totals.get(k) ?? 0) + 1);
    this.also?.(labels);
  }

  /** Totals since start by the key label (the action, the code). */
  counts(): Record<string, number> {
    return Object.fromEntries(this.totals);
  }
}

/** Lease states, as the lease-state gauge labels them. */
const LEASE_STATES = ["starting", "held", "fenced", "closed"] as const;

/** Redis sequence states, as its gauge labels them. */
const REDIS_STATES = [
  "starting",
  "ready",
  "fenced",
  "unavailable",
  "random-fallback",
  "closed",
] as const;

/** Every metric the server exposes on `/metrics`. */
export class ServerMetrics {
  /** The registry `/metrics` renders (default process metrics included). */
  readonly registry = new Registry();
  private readonly tallies = new Map<
    string,
    { mode: string; tag: string; tally: Tally; reported: number }
  >();
  private services: (() => LeafServices | undefined) | undefined;

  /** Segment ranges taken from the store, by tag and result. */
  readonly segmentLoads: Counter<"tag" | "result">;
  /** Time to take a range from the store, by tag. */
  readonly segmentLoadSeconds: Histogram<"tag">;
  /** Ranges handed to clients by `/api/v1/segment/:tag/range`, by tag. */
  readonly segmentRanges: Counter<"tag">;
  /** Store and registry operations that failed, by component and operation. */
  readonly storeErrors: Counter<"store" | "operation">;
  /** Clock-rollback events of the snowflake generator, by what it did. */
  readonly clockRollbacks: CountedEvents<"action">;
  /** Lease events of the snowflake worker (acquired, lost, report failed, ...). */
  readonly leaseEvents: Counter<"type">;
  /** Id requests answered with an error, by mode and code. */
  readonly requestErrors: CountedEvents<"mode" | "code">;
  /** HTTP requests answered, by method, route pattern and status. */
  private readonly httpRequests: Counter<"method" | "route" | "status_code">;
  /** Time to answer, by method, route pattern and status. */
  private readonly httpDuration: Histogram<"method" | "route" | "status_code">;
  private readonly httpChildren = new Map<
    string,
    { count: { inc(): void }; duration: { observe(v: number): void } }
  >();
  /** Ids, requests and errors per second, for the monitor page. */
  readonly activity = new Activity();
  /** Capacity: layout, worker ids, max_id headroom; and its warnings. */
  readonly capacity = new CapacityWatch(this.activity);
  private snowflake: SnowflakeTally | undefined;
  private capacityCache: { at: number; view: CapacityView } | undefined;
  private info: { version: string; config: string } | undefined;

  constructor() {
    const registers = [this.registry];
    // Node's process metrics under their usual names (process_cpu_seconds_total, nodejs_*), as
    // every Node.js dashboard expects them.
    collectDefaultMetrics({ register: this.registry });
    const metrics = this;
    this.httpRequests = new Counter({
      name: "http_requests_total",
      help: "HTTP requests answered, by method, route pattern (not the raw URL; unmatched for 404s) and status code.",
      labelNames: ["method", "route", "status_code"],
      registers,
    });
    this.httpDuration = new Histogram({
      name: "http_request_duration_seconds",
      help: "Time from receiving an HTTP request to answering it, by method, route pattern and status code.",
      labelNames: ["method", "route", "status_code"],
      buckets: [
        0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5,
        10,
      ],
      registers,
    });

    new Counter({
      name: "leaf_ids_issued_total",
      help: "Ids handed out, by mode and tag (the snowflake key selects nothing and is not a label).",
      labelNames: ["mode", "tag"],
      registers,
      collect() {
        for (const entry of metrics.tallies.values()) {
          const delta = entry.tally.n - entry.reported;
          if (delta > 0) {
            this.inc({ mode: entry.mode, tag: entry.tag }, delta);
            entry.reported = entry.tally.n;
          } else if (entry.reported === 0) {
            this.inc({ mode: entry.mode, tag: entry.tag }, 0);
          }
        }
      },
    });
    this.segmentLoads = new Counter({
      name: "leaf_segment_loads_total",
      help: "Segment ranges taken from the store, by tag and result (ok, error).",
      labelNames: ["tag", "result"],
      registers,
    });
    this.segmentLoadSeconds = new Histogram({
      name: "leaf_segment_load_duration_seconds",
      help: "Time to take one segment range from the store.",
      labelNames: ["tag"],
      buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
      registers,
    });
    this.segmentRanges = new Counter({
      name: "leaf_segment_ranges_total",
      help: "Ranges of segment ids handed to clients (/api/v1/segment/{tag}/range), by tag; their ids count in leaf_ids_issued_total.",
      labelNames: ["tag"],
      registers,
    });
    this.storeErrors = new Counter({
      name: "leaf_store_errors_total",
      help: "Failed operations of the segment store, the worker-id registry and Redis, by store and operation.",
      labelNames: ["store", "operation"],
      registers,
    });
    const rollbacks = new Counter({
      name: "leaf_snowflake_clock_rollbacks_total",
      help: "Times the clock was found behind the last issued timestamp, by what the generator did (waited, backup, refused).",
      labelNames: ["action"],
      registers,
    });
    // Every action from 0, so that rate() and increase() see the first one.
    for (const action of ["waited", "backup", "refused"]) rollbacks.inc({ action }, 0);
    this.clockRollbacks = new CountedEvents(rollbacks, "action");
    let overflowsReported = 0;
    new Counter({
      name: "leaf_snowflake_sequence_overflow_waits_total",
      help: "Snowflake ids that waited for the next tick because their tick's sequence was used up.",
      registers,
      collect() {
        const waits = metrics.overflowWaits;
        this.inc(waits - overflowsReported);
        overflowsReported = waits;
      },
    });
    this.leaseEvents = new Counter({
      name: "leaf_snowflake_lease_events_total",
      help: "Worker-id lease events (lease-acquired, lease-lost, reported, report-failed, reacquire-failed).",
      labelNames: ["type"],
      registers,
    });
    this.requestErrors = new CountedEvents<"mode" | "code">(
      new Counter({
        name: "leaf_request_errors_total",
        help: "Id requests answered with an error, by mode and error code.",
        labelNames: ["mode", "code"],
        registers,
      }),
      "code",
      (labels) => this.activity.error(labels.mode, labels.code),
    );
    new Gauge({
      name: "leaf_segment_ids_left",
      help: "Ids left in a tag's buffers (current and next range together).",
      labelNames: ["tag"],
      registers,
      collect() {
        this.reset();
        for (const snap of metrics.services?.()?.segment?.generator.snapshots() ?? []) {
          this.set({ tag: snap.tag }, Number(snap.idsLeft));
        }
      },
    });
    new Gauge({
      name: "leaf_segment_next_ready",
      help: "1 when a tag's next range is loaded and ready.",
      labelNames: ["tag"],
      registers,
      collect() {
        this.reset();
        for (const snap of metrics.services?.()?.segment?.generator.snapshots() ?? []) {
          this.set({ tag: snap.tag }, snap.nextReady ? 1 : 0);
        }
      },
    });
    new Gauge({
      name: "leaf_segment_tag_refused",
      help: "1 while a tag gets no range, by reason: refused until its row is fixed (max-id-moved-back, stale-primary, bad-step, bad-max-id, bad-range), or split-brain while more than one MySQL host is writable.",
      labelNames: ["tag", "reason"],
      registers,
      collect() {
        this.reset();
        for (const snap of metrics.services?.()?.segment?.generator.snapshots() ?? []) {
          const reason =
            snap.refused?.reason ??
            (snap.lastErrorReason === "split-brain" ? "split-brain" : undefined);
          if (reason !== undefined) this.set({ tag: snap.tag, reason }, 1);
        }
      },
    });
    new Gauge({
      name: "leaf_segment_tags",
      help: "Tags the segment generator serves.",
      registers,
      collect() {
        const segment = metrics.services?.()?.segment;
        this.set(segment ? segment.generator.tags().length : 0);
      },
    });
    new Gauge({
      name: "leaf_snowflake_lease_state",
      help: "1 for the snowflake worker's current lease state.",
      labelNames: ["state"],
      registers,
      collect() {
        const worker = metrics.services?.()?.snowflake?.worker;
        const state = worker ? worker.state : "starting";
        for (const s of LEASE_STATES) this.set({ state: s }, s === state ? 1 : 0);
      },
    });
    new Gauge({
      name: "leaf_snowflake_worker_id",
      help: "The snowflake worker id in use (-1 when none is held).",
      registers,
      collect() {
        const worker = metrics.services?.()?.snowflake?.worker;
        this.set(worker && worker.state === "held" ? worker.generator.activeWorkerId : -1);
      },
    });
    new Gauge({
      name: "leaf_snowflake_last_timestamp_seconds",
      help: "Time (seconds since 1970) of the last snowflake id issued; 0 before the first.",
      registers,
      collect() {
        const worker = metrics.services?.()?.snowflake?.worker;
        this.set(worker ? worker.generator.timestamps().primary.lastTimestamp / 1000 : 0);
      },
    });
    new Gauge({
      name: "leaf_snowflake_last_report_timestamp_seconds",
      help: "Time (seconds since 1970) of the last timestamp report the registry took; 0 before the first. Reports come every 3 s while the registry answers.",
      registers,
      collect() {
        const worker = metrics.services?.()?.snowflake?.worker;
        this.set(worker ? worker.lastReportAt / 1000 : 0);
      },
    });
    new Gauge({
      name: "leaf_snowflake_registry_up",
      help: "1 while the worker-id lease is held and the last timestamp report to the registry succeeded.",
      labelNames: ["registry"],
      registers,
      collect() {
        this.reset();
        const mode = metrics.services?.()?.snowflake;
        if (!mode) return;
        this.set({ registry: mode.registry.kind }, registryState(mode) === "connected" ? 1 : 0);
      },
    });
    new Gauge({
      name: "leaf_snowflake_layout_end_timestamp_seconds",
      help: "Time (seconds since 1970) of the layout's last instant: no snowflake id can be made after it.",
      registers,
      collect() {
        this.reset();
        const layout = metrics.capacityView().layout;
        if (layout) this.set(layout.lastInstantMs / 1000);
      },
    });
    new Gauge({
      name: "leaf_snowflake_layout_seconds_left",
      help: "Seconds until the layout's last instant.",
      registers,
      collect() {
        this.reset();
        const layout = metrics.capacityView().layout;
        if (layout) this.set(layout.secondsLeft);
      },
    });
    new Gauge({
      name: "leaf_snowflake_worker_ids",
      help: "Worker ids the layout holds (2^workerBits).",
      registers,
      collect() {
        this.reset();
        const w = metrics.capacityView().workerIds;
        if (w) this.set(w.space);
      },
    });
    new Gauge({
      name: "leaf_snowflake_worker_ids_left",
      help: "Worker ids never handed out yet, in registries that never give one back (zk normal, mysql fixed): the layout's space above the highest id this node holds. The minimum over all nodes is exact.",
      labelNames: ["registry", "mode"],
      registers,
      collect() {
        this.reset();
        const w = metrics.capacityView().workerIds;
        if (w && w.left !== null) this.set({ registry: w.registry, mode: w.mode }, w.left);
      },
    });
    new Gauge({
      name: "leaf_segment_seconds_left",
      help: "Seconds until a tag's two ranges run out at this node's rate over the last minute (no series while the tag is idle).",
      labelNames: ["tag"],
      registers,
      collect() {
        this.reset();
        for (const t of metrics.capacityView().tags) {
          if (t.bufferSecondsLeft !== null) this.set({ tag: t.tag }, t.bufferSecondsLeft);
        }
      },
    });
    new Gauge({
      name: "leaf_segment_max_id",
      help: "A tag's max_id: the store's as last read (each minute), or the end of this node's last range when higher.",
      labelNames: ["tag"],
      registers,
      collect() {
        this.reset();
        for (const t of metrics.capacityView().tags) this.set({ tag: t.tag }, Number(t.maxId));
      },
    });
    new Gauge({
      name: "leaf_segment_max_id_headroom",
      help: "Ids left between a tag's max_id and 2^63 - 1, the largest id a tag can reach.",
      labelNames: ["tag"],
      registers,
      collect() {
        this.reset();
        for (const t of metrics.capacityView().tags) this.set({ tag: t.tag }, Number(t.headroom));
      },
    });
    new Gauge({
      name: "leaf_segment_max_id_headroom_seconds",
      help: "Seconds until a tag's max_id reaches 2^63 - 1 at this node's rate over the last minute (no series while idle).",
      labelNames: ["tag"],
      registers,
      collect() {
        this.reset();
        for (const t of metrics.capacityView().tags) {
          if (t.headroomYears !== null) this.set({ tag: t.tag }, t.headroomYears * YEAR_SECONDS);
        }
      },
    });
    new Gauge({
      name: "leaf_segment_store_up",
      help: "1 when the last operation on the segment store succeeded, 0 when it failed.",
      labelNames: ["store"],
      registers,
      collect() {
        this.reset();
        const store = metrics.services?.()?.segment?.store;
        if (store instanceof InstrumentedStore) {
          this.set({ store: store.kind }, store.health().state === "down" ? 0 : 1);
        }
      },
    });
    new Gauge({
      name: "leaf_server_info",
      help: "1, labelled with the server's version and its configuration's fingerprint (equal on nodes with the same settings).",
      labelNames: ["version", "config"],
      registers,
      collect() {
        this.reset();
        if (metrics.info) this.set(metrics.info, 1);
      },
    });
    new Gauge({
      name: "leaf_capacity_warning",
      help: "1 for each capacity warning that holds now (subject: layout, worker-ids, max-id:<tag>); see the log for its text.",
      labelNames: ["subject"],
      registers,
      collect() {
        this.reset();
        for (const w of metrics.capacityView().warnings) this.set({ subject: w.subject }, 1);
      },
    });
    new Gauge({
      name: "leaf_redis_sequence_state",
      help: "1 for the redis sequence's current state.",
      labelNames: ["state"],
      registers,
      collect() {
        this.reset();
        const redis = metrics.services?.()?.redisSequence;
        if (!redis) return;
        const status = redis.sequence.state().status;
        for (const s of REDIS_STATES) this.set({ state: s }, s === status ? 1 : 0);
      },
    });
  }

  /** Lets the collectors read the running services. */
  attach(services: () => LeafServices | undefined): void {
    this.services = services;
  }

  /** Binds the server: its services, the capacity watch's configuration and logger. */
  bind(ctx: ServerView, logger: ServiceLogger): void {
    this.services ??= () => ctx.services;
    this.info = { version: ctx.version, config: configSummary(ctx.config).fingerprint };
    this.capacity.bind(ctx, logger);
  }

  /** Starts the once-a-second activity samples and the capacity checks (start-up warnings first). */
  start(): void {
    this.activity.start();
    this.capacity.start();
  }

  stop(): void {
    this.activity.stop();
    this.capacity.stop();
  }

  /** Counts one HTTP answer. `route` is the route's pattern, never the raw URL. */
  observeRequest(method: string, route: string, status: number, seconds: number): void {
    const key = `${method} ${status} ${route}`;
    let child = this.httpChildren.get(key);
    if (child === undefined) {
      const labels = { method, route, status_code: String(status) };
      child = {
        count: this.httpRequests.labels(labels),
        duration: this.httpDuration.labels(labels),
      };
      this.httpChildren.set(key, child);
    }
    child.count.inc();
    child.duration.observe(seconds);
  }

  /** Capacity now, computed at most once per scrape. */
  capacityView(): CapacityView {
    const now = Date.now();
    if (this.capacityCache === undefined || now - this.capacityCache.at > 100) {
      this.capacityCache = { at: now, view: this.capacity.view(now) };
    }
    return this.capacityCache.view;
  }

  /** The snowflake ids counter (one per server; `layout` is the configured one). */
  snowflakeTally(layout: Layout = layouts.leaf): SnowflakeTally {
    if (this.snowflake === undefined) {
      this.snowflake = new SnowflakeTally(layout);
      this.track("snowflake", "", this.snowflake);
    }
    return this.snowflake;
  }

  /** Sequence-overflow waits so far (0 without snowflake mode). */
  get overflowWaits(): number {
    return this.snowflake?.overflowWaits ?? 0;
  }

  /** The hot-path counter of ids issued for a mode and tag (created on first use). */
  tally(mode: string, tag: string): Tally {
    const key = `${mode}\u0000${tag}`;
    return this.tallies.get(key)?.tally ?? this.track(mode, tag, { n: 0 });
  }

  private track<T extends Tally>(mode: string, tag: string, tally: T): T {
    this.tallies.set(`${mode}\u0000${tag}`, { mode, tag, tally, reported: 0 });
    this.activity.followIds(mode, tag, () => tally.n);
    return tally;
  }
}

const YEAR_SECONDS = 365.25 * 24 * 3600;

/**
 * The registry connection as the monitor and metrics show it: "connected" while the lease is held
 * and the last report succeeded, "reports failing" while reports fail (the lease is still held),
 * "lease lost" while fenced, "closed".
 */
export function registryState(mode: {
  worker: SnowflakeWorker;
  events: ReadonlyArray<{ at: number; type: string }>;
}): "connected" | "reports failing" | "lease lost" | "closed" {
  const state = mode.worker.state;
  if (state === "closed") return "closed";
  if (state === "fenced") return "lease lost";
  let lastFailure = 0;
  for (const e of mode.events) if (e.type === "report-failed") lastFailure = e.at;
  return lastFailure > mode.worker.lastReportAt ? "reports failing" : "connected";
}
