// Prometheus metrics (prom-client). The id paths only bump plain counters; the registry reads
// them, and the generators' state, when it is scraped, so that metrics cost the hot path nothing.
// The same counters feed the monitor's per-second activity, and the capacity watch its warnings.
import { type Layout, layouts } from "@leaf/core";
import { Counter, collectDefaultMetrics, Histogram, Registry } from "prom-client";
import { Activity } from "./activity";
import { HttpAnswers } from "./answer-metrics";
import { describeBackends } from "./backends/index";
import { type CapacityView, CapacityWatch } from "./capacity";
import { configSummary } from "./config-summary";
import { registerStateGauges } from "./metrics-gauges";
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

  /**
   * Before asking for ids: a wait follows when the last id used its tick up and it is still that
   * tick.
   */
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

/**
 * A labelled counter the monitor reads too: Prometheus's counter plus plain totals per label set.
 */
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

/** Redis sequence states, as its gauge labels them. */

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
  /** HTTP answers by method, route pattern and status: counted, and timed in a histogram. */
  readonly answers = new HttpAnswers();
  /** Ids, requests and errors per second, for the monitor page. */
  readonly activity = new Activity();
  /** Capacity: layout, worker ids, max_id headroom; and its warnings. */
  readonly capacity = new CapacityWatch(this.activity);
  private snowflake: SnowflakeTally | undefined;
  private capacityCache: { at: number; view: CapacityView } | undefined;
  private info: { version: string; config: string } | undefined;
  private backends: ReturnType<typeof describeBackends> = [];

  constructor() {
    const registers = [this.registry];
    // Node's process metrics under their usual names (process_cpu_seconds_total, nodejs_*), as
    // every Node.js dashboard expects them.
    collectDefaultMetrics({ register: this.registry });
    const metrics = this;
    this.answers.register(this.registry);

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
    registerStateGauges(
      {
        services: () => metrics.services?.(),
        capacityView: () => metrics.capacityView(),
        info: () => metrics.info,
        backends: () => metrics.backends,
      },
      registers,
    );
  }

  /** Lets the collectors read the running services. */
  attach(services: () => LeafServices | undefined): void {
    this.services = services;
  }

  /** Binds the server: its services, the capacity watch's configuration and logger. */
  bind(ctx: ServerView, logger: ServiceLogger): void {
    this.services ??= () => ctx.services;
    this.info = { version: ctx.version, config: configSummary(ctx.config).fingerprint };
    this.backends = describeBackends(ctx.config);
    this.capacity.bind(ctx, logger);
  }

  /**
   * Starts the once-a-second activity samples and the capacity checks (start-up warnings first).
   */
  start(): void {
    this.activity.start();
    this.capacity.start();
  }

  stop(): void {
    this.activity.stop();
    this.capacity.stop();
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
