// Prometheus metrics (prom-client). The id paths only bump plain counters; the registry reads
// them, and the generators' state, when it is scraped, so that metrics cost the hot path nothing.
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from "prom-client";
import { type LeafServices, leaseState } from "./leaf-services";

/** A counter bumped on the hot path: a plain number read at scrape time. */
export interface Tally {
  n: number;
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
  /** Store and registry operations that failed, by component and operation. */
  readonly storeErrors: Counter<"store" | "operation">;
  /** Clock-rollback events of the snowflake generator, by what it did. */
  readonly clockRollbacks: Counter<"action">;
  /** Lease events of the snowflake worker (acquired, lost, report failed, ...). */
  readonly leaseEvents: Counter<"type">;
  /** Id requests answered with an error, by mode and code. */
  readonly requestErrors: Counter<"mode" | "code">;

  constructor() {
    const registers = [this.registry];
    collectDefaultMetrics({ register: this.registry, prefix: "leaf_process_" });
    const metrics = this;

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
    this.storeErrors = new Counter({
      name: "leaf_store_errors_total",
      help: "Failed operations of the segment store, the worker-id registry and Redis, by store and operation.",
      labelNames: ["store", "operation"],
      registers,
    });
    this.clockRollbacks = new Counter({
      name: "leaf_snowflake_clock_rollbacks_total",
      help: "Times the clock was found behind the last issued timestamp, by what the generator did (waited, backup, refused).",
      labelNames: ["action"],
      registers,
    });
    this.leaseEvents = new Counter({
      name: "leaf_snowflake_lease_events_total",
      help: "Worker-id lease events (lease-acquired, lease-lost, reported, report-failed, reacquire-failed).",
      labelNames: ["type"],
      registers,
    });
    this.requestErrors = new Counter({
      name: "leaf_request_errors_total",
      help: "Id requests answered with an error, by mode and error code.",
      labelNames: ["mode", "code"],
      registers,
    });
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
        const state = worker ? leaseState(worker) : "starting";
        for (const s of LEASE_STATES) this.set({ state: s }, s === state ? 1 : 0);
      },
    });
    new Gauge({
      name: "leaf_snowflake_worker_id",
      help: "The snowflake worker id in use (-1 when none is held).",
      registers,
      collect() {
        const worker = metrics.services?.()?.snowflake?.worker;
        this.set(worker && leaseState(worker) === "held" ? worker.generator.activeWorkerId : -1);
      },
    });
    new Gauge({
      name: "leaf_snowflake_last_timestamp_ms",
      help: "Timestamp (ms since 1970) of the last snowflake id issued.",
      registers,
      collect() {
        const worker = metrics.services?.()?.snowflake?.worker;
        this.set(worker ? worker.generator.timestamps().primary.lastTimestamp : 0);
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

  /** The hot-path counter of ids issued for a mode and tag (created on first use). */
  tally(mode: string, tag: string): Tally {
    const key = `${mode}\u0000${tag}`;
    let entry = this.tallies.get(key);
    if (entry === undefined) {
      entry = { mode, tag, tally: { n: 0 }, reported: 0 };
      this.tallies.set(key, entry);
    }
    return entry.tally;
  }
}
