// The data of the monitor page (Java Leaf's /cache and /db, and more), as JSON: ids and other
// 64-bit values as strings, times in ms since 1970.
import type { TagRecord } from "@leaf/segment";
import { registryBackend, storeBackend } from "./backends/index";
import type { WorkersView } from "./cluster-worker";
import { configSummary } from "./config-summary";
import type { AppContext } from "./id-sources";
import { InstrumentedStore } from "./instrumented-store";
import { registryState } from "./metrics-gauges";
import { isReady, tagState } from "./readiness";
import { tagJson } from "./routes-admin";

/**
 * What `/api/v1/monitor` answers. `workers`: the server's worker processes when it runs several
 * (server.workers); the rest is the state of the worker that answers.
 */
export function monitorState(ctx: AppContext, workers: WorkersView | null = null) {
  const now = Date.now();
  return {
    now,
    server: {
      name: ctx.config.name,
      version: ctx.version,
      state: ctx.state,
      startedAt: ctx.startedAt,
      uptimeMs: now - ctx.startedAt,
      pid: process.pid,
      config: configSummary(ctx.config),
    },
    activity: ctx.metrics.activity.view(),
    capacity: ctx.metrics.capacityView(),
    segment: segmentState(ctx),
    snowflake: snowflakeState(ctx, now),
    redisSequence: redisState(ctx),
    /** Every worker process ready, when there are several. */
    ready: workers
      ? isReady(ctx) && !workers.stopping && workers.list.every((w) => w.summary?.ready === true)
      : isReady(ctx),
    workers,
  };
}

function segmentState(ctx: AppContext) {
  if (!ctx.config.segment) return { enabled: false as const };
  const mode = ctx.services?.segment;
  const { store, backend: settings } = ctx.config.segment;
  /** Where ranges come from: the store's kind, mode and address (no secrets). */
  const backend = storeBackend(store).describe(settings);
  if (!mode) return { enabled: true as const, running: false as const, store, backend };
  const status = mode.generator.status();
  return {
    enabled: true as const,
    running: true as const,
    store: mode.store.kind,
    backend,
    /** The database (or embedded store) as the last operations saw it. */
    storeHealth: mode.store instanceof InstrumentedStore ? mode.store.health() : null,
    /** A store of several databases (a residue set): each one's state, residue, ranges taken. */
    members: mode.members?.() ?? null,
    status,
    tags: mode.generator.snapshots().map((s) => ({
      tag: s.tag,
      /** ready, lazy (loaded by its first request), loading, load-failing, refused, exhausted. */
      state: tagState(s),
      /** Why the tag gets no range (refused or used up), or null. */
      refused: s.refused,
      initialized: s.initialized,
      currentPos: s.currentPos,
      /** A residue set's range also has `stride` and `remainder` (the class of its ids). */
      segments: s.segments.map((r) =>
        r === null ? null : { ...r, value: r.value.toString(), max: r.max.toString() },
      ),
      nextReady: s.nextReady,
      loading: s.loading,
      idsLeft: s.idsLeft.toString(),
      step: s.step,
      tableStep: s.tableStep,
      lastLoadAt: s.lastLoadAt,
      lastLoadDurationMs: s.lastLoadDurationMs,
      loads: s.loads,
      loadFailures: s.loadFailures,
      consecutiveFailures: s.consecutiveFailures,
      lastError: s.lastError,
      retryInMs: s.retryInMs,
    })),
  };
}

function snowflakeState(ctx: AppContext, now: number) {
  if (!ctx.config.snowflake) return { enabled: false as const };
  const mode = ctx.services?.snowflake;
  const layout = ctx.config.snowflake.layout;
  const layoutInfo = {
    name: layout.name,
    epoch: layout.epoch,
    timestampBits: layout.timestampBits,
    workerBits: layout.workerBits,
    sequenceBits: layout.sequenceBits,
    unitMillis: layout.unitMillis,
    lastInstantMs: layout.lastInstantMs,
  };
  const settings = ctx.config.snowflake.registry;
  /** Where the worker id comes from: the registry's kind, mode and address (no secrets). */
  const backend = registryBackend(settings.kind).describe(settings);
  if (!mode) {
    return {
      enabled: true as const,
      running: false as const,
      registry: settings.kind,
      backend,
      layout: layoutInfo,
    };
  }
  const { worker } = mode;
  const stamps = worker.generator.timestamps();
  const lastTimestamp = stamps.primary.lastTimestamp;
  return {
    enabled: true as const,
    running: true as const,
    registry: mode.registry.kind,
    backend,
    node: mode.node,
    state: worker.state,
    /** The registry connection: connected, reports failing, lease lost, closed. */
    registryState: registryState(mode),
    /** Ids that waited for the next tick because their tick's sequence was used up. */
    overflowWaits: ctx.metrics.overflowWaits,
    /** Clock rollbacks since start, by what the generator did (waited, backup, refused). */
    rollbacks: ctx.metrics.clockRollbacks.counts(),
    workerId: worker.lease?.workerId ?? stamps.primary.workerId,
    activeWorkerId: stamps.activeWorkerId,
    backups: stamps.backups,
    lastTimestamp,
    lastReportAt: worker.lastReportAt,
    /** Clock minus the last issued timestamp: negative means the clock is behind the last id. */
    clockOffsetMs: lastTimestamp > 0 ? now - lastTimestamp : null,
    layout: layoutInfo,
    events: mode.events,
  };
}

function redisState(ctx: AppContext) {
  if (!ctx.config.redisSequence) return { enabled: false as const };
  const mode = ctx.services?.redisSequence;
  if (!mode) return { enabled: true as const, running: false as const };
  return { enabled: true as const, running: true as const, ...mode.sequence.state() };
}

/** The JSON of `/api/v1/monitor`, as the monitor page's script reads it. */
export type MonitorState = ReturnType<typeof monitorState>;

/** One row of `/api/v1/monitor/store`. */
export type StoreRow = ReturnType<typeof tagJson>;

/**
 * Rows of the store (Java Leaf's /db page), cached briefly so that many open pages cost one query.
 */
export class StoreRows {
  private cached: { at: number; rows: ReturnType<typeof tagJson>[] } | undefined;
  private pending: Promise<ReturnType<typeof tagJson>[]> | undefined;

  constructor(private readonly maxAgeMs = 2000) {}

  async rows(load: () => Promise<TagRecord[]>): Promise<ReturnType<typeof tagJson>[]> {
    if (this.cached && Date.now() - this.cached.at < this.maxAgeMs) return this.cached.rows;
    this.pending ??= load()
      .then((records) => {
        const rows = records.map(tagJson);
        this.cached = { at: Date.now(), rows };
        return rows;
      })
      .finally(() => {
        this.pending = undefined;
      });
    return this.pending;
  }
}
