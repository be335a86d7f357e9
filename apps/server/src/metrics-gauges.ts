// The gauges /metrics reads at scrape time from the running services: segment buffers and refused
// tags, the snowflake lease and worker id, the registry connection, capacity and its warnings, the
// redis sequence. Nothing here runs on an id path. Apart from metrics.ts, which keeps the counters
// the id paths bump.
import type { SnowflakeWorker } from "@leaf/core";
import { Gauge, type Registry } from "prom-client";
import type { describeBackends } from "./backends/index";
import type { CapacityView } from "./capacity";
import { InstrumentedStore } from "./instrumented-store";
import { tagState } from "./readiness";
import type { LeafServices } from "./service-types";

/** What the gauges read when scraped. */
export interface GaugeSource {
  services(): LeafServices | undefined;
  capacityView(): CapacityView;
  /** The server's version and configuration summary (leaf_info). */
  info(): { version: string; config: string } | undefined;
  /** The backends the server uses, as their entries describe them. */
  backends(): ReturnType<typeof describeBackends>;
}

const LEASE_STATES = ["starting", "held", "fenced", "closed"] as const;
const REDIS_STATES = [
  "starting",
  "ready",
  "fenced",
  "unavailable",
  "random-fallback",
  "closed",
] as const;
const YEAR_SECONDS = 365.25 * 24 * 3600;

/** Registers the scrape-time gauges on `registers`. */
export function registerStateGauges(source: GaugeSource, registers: Registry[]): void {
  new Gauge({
    name: "leaf_segment_ids_left",
    help: "Ids left in a tag's buffers (current and next range together).",
    labelNames: ["tag"],
    registers,
    collect() {
      this.reset();
      for (const snap of source.services()?.segment?.generator.snapshots() ?? []) {
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
      for (const snap of source.services()?.segment?.generator.snapshots() ?? []) {
        this.set({ tag: snap.tag }, snap.nextReady ? 1 : 0);
      }
    },
  });
  new Gauge({
    name: "leaf_segment_tag_refused",
    help: "1 while a tag gets no range, by reason: refused until its row is fixed (max-id-moved-back, stale-primary, bad-step, bad-max-id, bad-range), exhausted (used up: no range fits below 2^63 - 1), or split-brain while more than one host listed for a MySQL or PostgreSQL store is writable.",
    labelNames: ["tag", "reason"],
    registers,
    collect() {
      this.reset();
      for (const snap of source.services()?.segment?.generator.snapshots() ?? []) {
        const reason =
          snap.refused?.reason ??
          (snap.lastErrorReason === "split-brain" ? "split-brain" : undefined);
        if (reason !== undefined) this.set({ tag: snap.tag, reason }, 1);
      }
    },
  });
  new Gauge({
    name: "leaf_segment_tag_state",
    help: "1 for each tag's state on this node: ready, lazy (its first range is taken by its first request), loading, load-failing, refused, exhausted (used up). None of them changes readiness.",
    labelNames: ["tag", "state"],
    registers,
    collect() {
      this.reset();
      for (const snap of source.services()?.segment?.generator.snapshots() ?? []) {
        this.set({ tag: snap.tag, state: tagState(snap) }, 1);
      }
    },
  });
  new Gauge({
    name: "leaf_segment_tags",
    help: "Tags the segment generator serves.",
    registers,
    collect() {
      const segment = source.services()?.segment;
      this.set(segment ? segment.generator.tags().length : 0);
    },
  });
  new Gauge({
    name: "leaf_snowflake_lease_state",
    help: "1 for the snowflake worker's current lease state.",
    labelNames: ["state"],
    registers,
    collect() {
      const worker = source.services()?.snowflake?.worker;
      const state = worker ? worker.state : "starting";
      for (const s of LEASE_STATES) this.set({ state: s }, s === state ? 1 : 0);
    },
  });
  new Gauge({
    name: "leaf_snowflake_worker_id",
    help: "The snowflake worker id in use (-1 when none is held).",
    registers,
    collect() {
      const worker = source.services()?.snowflake?.worker;
      this.set(worker && worker.state === "held" ? worker.generator.activeWorkerId : -1);
    },
  });
  new Gauge({
    name: "leaf_snowflake_last_timestamp_seconds",
    help: "Time (seconds since 1970) of the last snowflake id issued; 0 before the first.",
    registers,
    collect() {
      const worker = source.services()?.snowflake?.worker;
      this.set(worker ? worker.generator.timestamps().primary.lastTimestamp / 1000 : 0);
    },
  });
  new Gauge({
    name: "leaf_snowflake_last_report_timestamp_seconds",
    help: "Time (seconds since 1970) of the last timestamp report the registry took; 0 before the first. Reports come every 3 s while the registry answers.",
    registers,
    collect() {
      const worker = source.services()?.snowflake?.worker;
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
      const mode = source.services()?.snowflake;
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
      const layout = source.capacityView().layout;
      if (layout) this.set(layout.lastInstantMs / 1000);
    },
  });
  new Gauge({
    name: "leaf_snowflake_layout_seconds_left",
    help: "Seconds until the layout's last instant.",
    registers,
    collect() {
      this.reset();
      const layout = source.capacityView().layout;
      if (layout) this.set(layout.secondsLeft);
    },
  });
  new Gauge({
    name: "leaf_snowflake_worker_ids",
    help: "Worker ids the layout holds (2^workerBits).",
    registers,
    collect() {
      this.reset();
      const w = source.capacityView().workerIds;
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
      const w = source.capacityView().workerIds;
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
      for (const t of source.capacityView().tags) {
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
      for (const t of source.capacityView().tags) this.set({ tag: t.tag }, Number(t.maxId));
    },
  });
  new Gauge({
    name: "leaf_segment_max_id_headroom",
    help: "Ids left between a tag's max_id and 2^63 - 1, the largest id a tag can reach.",
    labelNames: ["tag"],
    registers,
    collect() {
      this.reset();
      for (const t of source.capacityView().tags) this.set({ tag: t.tag }, Number(t.headroom));
    },
  });
  new Gauge({
    name: "leaf_segment_max_id_headroom_seconds",
    help: "Seconds until a tag's max_id reaches 2^63 - 1 at the current rate: this node's over the last minute, or the store's max_id growth over the last hour when faster (0 once used up; no series while idle).",
    labelNames: ["tag"],
    registers,
    collect() {
      this.reset();
      for (const t of source.capacityView().tags) {
        if (t.headroomYears !== null) this.set({ tag: t.tag }, t.headroomYears * YEAR_SECONDS);
      }
    },
  });
  new Gauge({
    name: "leaf_segment_max_id_headroom_days",
    help: "leaf_segment_max_id_headroom_seconds in days, as capacity is planned (0 once used up; no series while idle).",
    labelNames: ["tag"],
    registers,
    collect() {
      this.reset();
      for (const t of source.capacityView().tags) {
        if (t.headroomDays !== null) this.set({ tag: t.tag }, t.headroomDays);
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
      const store = source.services()?.segment?.store;
      if (store instanceof InstrumentedStore) {
        this.set({ store: store.kind }, store.health().state === "down" ? 0 : 1);
      }
    },
  });
  new Gauge({
    name: "leaf_segment_store_member_up",
    help: "A segment store of several databases (a residue set): 1 while a database answers (its residue read and checked, its last call successful), by member (its address, no secrets) and remainder (its residue class; empty until read).",
    labelNames: ["member", "remainder"],
    registers,
    collect() {
      this.reset();
      for (const m of source.services()?.segment?.members?.() ?? []) {
        this.set(
          { member: m.name, remainder: m.remainder === null ? "" : String(m.remainder) },
          m.up ? 1 : 0,
        );
      }
    },
  });
  new Gauge({
    name: "leaf_segment_store_member_ranges",
    help: "A segment store of several databases (a residue set): ranges this node took from each database since it started.",
    labelNames: ["member"],
    registers,
    collect() {
      this.reset();
      for (const m of source.services()?.segment?.members?.() ?? []) {
        this.set({ member: m.name }, m.rangesTaken);
      }
    },
  });
  new Gauge({
    name: "leaf_backend_info",
    help: "1 for each backend the server uses: the segment store and the worker-id registry, with their kind, mode and address (no secrets), and whether other servers share them.",
    labelNames: ["role", "kind", "mode", "target", "shared"],
    registers,
    collect() {
      this.reset();
      for (const b of source.backends()) {
        this.set(
          { role: b.role, kind: b.kind, mode: b.mode, target: b.target, shared: String(b.shared) },
          1,
        );
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
      const info = source.info();
      if (info) this.set(info, 1);
    },
  });
  new Gauge({
    name: "leaf_capacity_warning",
    help: "1 for each capacity warning that holds now (subject: layout, worker-ids, max-id:<tag>); see the log for its text.",
    labelNames: ["subject"],
    registers,
    collect() {
      this.reset();
      for (const w of source.capacityView().warnings) this.set({ subject: w.subject }, 1);
    },
  });
  new Gauge({
    name: "leaf_redis_sequence_state",
    help: "1 for the redis sequence's current state.",
    labelNames: ["state"],
    registers,
    collect() {
      this.reset();
      const redis = source.services()?.redisSequence;
      if (!redis) return;
      const status = redis.sequence.state().status;
      for (const s of REDIS_STATES) this.set({ state: s }, s === status ? 1 : 0);
    },
  });
}

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
