// Starts the id sources the configuration asks for (segment generator and its store, snowflake
// worker and its registry, redis sequence) and closes them in the right order. Stores and
// registries are built by their backend entries (backends/); registries and Redis are imported only
// when configured, so an unused mode loads nothing.

import { join } from "node:path";
import {
  type ClockRollbackEvent,
  ErrorCodes,
  isLeafError,
  LeafError,
  localIPv4,
  type NodeIdentity,
  SnowflakeWorker,
  type SnowflakeWorkerEvent,
  type WorkerIdRegistry,
} from "@leaf/core";
import type { RedisSequence } from "@leaf/redis-sequence";
import { SegmentIdGenerator, type SegmentStore } from "@leaf/segment";
import type { WorkerPlace } from "./backends/backend";
import { registryBackend, storeBackend } from "./backends/index";
import type { ServerConfig } from "./config";
import { segmentStoreId } from "./config-segment";
import { InstrumentedStore } from "./instrumented-store";
import type { ServerMetrics } from "./metrics";
import type {
  LeafServices,
  LeaseEventRecord,
  RedisSequenceMode,
  SegmentMode,
  ServiceLogger,
  SnowflakeMode,
} from "./service-types";
import { workerNodeIp } from "./worker-identity";

// The shapes of the running services live in service-types.ts (the metrics read them too).
export type * from "./service-types";

/** Options of {@link startServices}. */
export interface StartServicesOptions {
  config: ServerConfig;
  metrics: ServerMetrics;
  logger: ServiceLogger;
  /** The port the server listens on: the node's port in the registry unless configured. */
  port: number;
  /**
   * Set in a worker process of a server with several (server.workers): which worker it is, and
   * the primary's store for a store whose folder is one process's (the embedded store).
   */
  worker?: WorkerPlace & { remoteStore(kind: string): SegmentStore };
}

const COMPONENT = "server";

/**
 * Starts every enabled mode, one after the other. When one fails, those already started are
 * closed again and the error is rethrown (the server then exits non-zero).
 */
export async function startServices(options: StartServicesOptions): Promise<LeafServices> {
  const closers: Array<() => Promise<void>> = [];
  const services: LeafServices = {
    segment: undefined,
    snowflake: undefined,
    redisSequence: undefined,
    async close() {
      const errors: unknown[] = [];
      for (const close of closers.splice(0).reverse()) {
        await close().catch((error: unknown) => errors.push(error));
      }
      if (errors.length > 0) throw errors[0];
    },
  };
  try {
    if (options.config.segment) services.segment = await startSegment(options, closers);
    if (options.config.snowflake) services.snowflake = await startSnowflake(options, closers);
    if (options.config.redisSequence) services.redisSequence = await startRedis(options, closers);
  } catch (error) {
    await services.close().catch(() => {});
    throw error;
  }
  return services;
}

async function startSegment(
  { config, metrics, logger, worker }: StartServicesOptions,
  closers: Array<() => Promise<void>>,
): Promise<SegmentMode> {
  const settings = config.segment!;
  const entry = storeBackend(settings.store);
  const context = { logger };
  // A worker process takes its ranges from the store its primary opened (one process's folder).
  const remote = entry.oneProcess === true && worker !== undefined;
  let raw: SegmentStore;
  try {
    raw = remote ? worker.remoteStore(entry.kind) : await entry.open(settings.backend, context);
  } catch (error) {
    // A store of this node's own (a folder) is named; a shared one's errors name its host.
    const { kind, target } = entry.describe(settings.backend);
    const what = entry.shared ? "segment mode" : `segment mode (${kind} store in ${target})`;
    throw startFailure(what, entry.explainError?.(error) ?? error);
  }
  const store = new InstrumentedStore(raw, metrics);
  const storeId = segmentStoreId(settings);
  const generator = new SegmentIdGenerator({
    store,
    refreshIntervalMs: settings.refreshIntervalMs,
    exhaustedWaitMs: settings.exhaustedWaitMs,
    dynamicStep: settings.dynamicStep,
    prefetch: { maxDepth: settings.prefetchMaxDepth },
    giveBackOnClose: settings.giveBackOnClose,
    // The end of the highest range taken per tag, on disk: after a restart a max_id moved back
    // below it (a hand edit, a promoted replica that missed writes) is refused, not served again.
    // Each worker process keeps its own (worker 1 the single process's folder).
    // A store whose entry names no mark id keeps none (a residue set: its ranges interleave).
    highWater:
      storeId === undefined
        ? undefined
        : {
            dir:
              worker === undefined || worker.slot === 1
                ? settings.highWaterDir
                : join(settings.highWaterDir, `worker-${worker.slot}`),
            storeId,
          },
    loadOnStart:
      settings.load === "eager"
        ? true
        : {
            tags: settings.eagerTags,
            updatedWithinMs: settings.load === "recent" ? settings.recentMs : undefined,
          },
    maxBatch: config.server.maxBatch,
    onError: (error, context) => {
      const fields = { err: error, tag: context.tag, operation: context.operation };
      const what = `segment ${context.operation} failed${context.tag ? ` for tag ${context.tag}` : ""}`;
      // A refused tag or a split brain needs an operator: nothing is retried into duplicates.
      if (context.level === "error") {
        logger.error(
          fields,
          context.refused
            ? `${what}; the tag is not served until its row is fixed`
            : `${what}; no range is taken until it is resolved`,
        );
      } else logger.warn(fields, `${what}; retrying`);
    },
  });
  closers.push(() => generator.close());
  try {
    if (!remote) await entry.prepare?.(store, settings.backend, context);
    await generator.start();
  } catch (error) {
    throw startFailure("segment mode", error);
  }
  const loaded = generator.snapshots().filter((s) => s.initialized).length;
  logger.info(
    { store: store.kind, tags: generator.tags().length, loaded },
    `segment mode ready on the ${store.kind} store: ${generator.tags().length} tag(s)`,
  );
  const { members } = entry;
  return { generator, store, members: members && (() => members(raw)) };
}

async function startSnowflake(
  { config, metrics, logger, port, worker: place }: StartServicesOptions,
  closers: Array<() => Promise<void>>,
): Promise<SnowflakeMode> {
  const settings = config.snowflake!;
  const node: NodeIdentity = {
    name: config.name,
    // Each worker process is a node of its own to the registry (see worker-identity.ts).
    ip: workerNodeIp(settings.ip ?? localIPv4(), place?.slot),
    port: settings.port ?? port,
  };
  const entry = registryBackend(settings.registry.kind);
  const explain = (error: unknown) => entry.explainError?.(error) ?? error;
  let registry: WorkerIdRegistry;
  try {
    registry = await entry.create(settings.registry, {
      config,
      snowflake: settings,
      worker: place && { slot: place.slot, count: place.count },
    });
  } catch (error) {
    throw startFailure(`snowflake mode (${entry.kind} registry)`, explain(error));
  }
  closers.push(() => registry.close());
  const events: LeaseEventRecord[] = [];
  const record = (type: LeaseEventRecord["type"], text: string) => {
    events.push({ at: Date.now(), type, text });
    if (events.length > 20) events.shift();
  };
  const onEvent = (event: SnowflakeWorkerEvent) => {
    metrics.leaseEvents.inc({ type: event.type });
    switch (event.type) {
      case "lease-acquired":
        record(event.type, `worker id ${event.workerId} acquired`);
        logger.info(
          { workerId: event.workerId, lastTimestamp: event.lastTimestamp },
          "snowflake lease acquired",
        );
        break;
      case "lease-lost":
        record(event.type, `worker id ${event.workerId} lost: ${event.error.message}`);
        logger.error(
          { workerId: event.workerId, err: event.error },
          "snowflake lease lost: ids refused until a new lease is held",
        );
        break;
      case "report-failed":
        metrics.storeErrors.inc({ store: registry.kind, operation: "report" });
        record(event.type, `report failed: ${message(event.error)}`);
        logger.warn(
          { workerId: event.workerId, err: event.error },
          "snowflake timestamp report failed",
        );
        break;
      case "reacquire-failed":
        metrics.storeErrors.inc({ store: registry.kind, operation: "acquire" });
        record(
          event.type,
          `re-acquire attempt ${event.attempt + 1} failed: ${message(event.error)}`,
        );
        logger.warn(
          { attempt: event.attempt, err: event.error },
          "snowflake lease re-acquire failed",
        );
        break;
      case "reported":
        break;
    }
  };
  const onClockRollback = (event: ClockRollbackEvent) => {
    metrics.clockRollbacks.inc({ action: event.action });
    record(
      "clock-rollback",
      `clock ${event.offsetMs} ms behind: ${event.action} (worker id ${event.workerId})`,
    );
    logger.warn({ ...event }, `clock moved back ${event.offsetMs} ms: ${event.action}`);
  };
  let worker: SnowflakeWorker;
  try {
    worker = new SnowflakeWorker({
      registry,
      node,
      layout: settings.layout,
      backups: settings.backups,
      // A StatefulSet pod asks a shared registry for its ordinal's id for this worker process (the
      // local registry is given it).
      ...(settings.pod && settings.registry.kind !== "local"
        ? { workerId: settings.pod.workerIds[(place?.slot ?? 1) - 1]! }
        : {}),
      startToleranceMs: settings.toleranceMs,
      generator: { rollbackToleranceMs: settings.toleranceMs, onClockRollback },
      onEvent,
    });
    await worker.start();
  } catch (error) {
    throw startFailure(
      `snowflake mode (${registry.kind} registry, node ${node.ip}:${node.port})`,
      explain(error),
    );
  }
  closers.push(() => worker.close());
  logger.info(
    { registry: registry.kind, workerId: worker.generator.activeWorkerId, node },
    `snowflake mode ready: worker id ${worker.generator.activeWorkerId} from the ${registry.kind} registry`,
  );
  return { worker, registry, layout: settings.layout, node, events };
}

async function startRedis(
  { config, metrics, logger }: StartServicesOptions,
  closers: Array<() => Promise<void>>,
): Promise<RedisSequenceMode> {
  const settings = config.redisSequence!;
  const { RedisSequence } = await import("@leaf/redis-sequence");
  let sequence: RedisSequence | undefined;
  try {
    sequence = new RedisSequence({
      url: settings.url,
      namespace: settings.namespace,
      prefix: settings.prefix,
      timeZone: settings.timeZone,
      ...(settings.batchSize !== undefined ? { batchSize: settings.batchSize } : {}),
      onWarning: (warning) => {
        if (warning.type === "redis-unavailable") {
          metrics.storeErrors.inc({ store: "redis", operation: "allocate" });
        }
        logger.warn({ type: warning.type, details: warning.details }, warning.message);
      },
    });
    await sequence.start();
  } catch (error) {
    await sequence?.close();
    throw startFailure("the redis sequence", error);
  }
  const ready = sequence;
  closers.push(() => ready.close());
  logger.info({ namespace: settings.namespace }, "redis sequence ready");
  return { sequence, prefix: settings.prefix };
}

/** A start-up failure that says which mode could not start, keeping the original code. */
function startFailure(what: string, error: unknown): LeafError {
  if (isLeafError(error)) {
    return new LeafError({
      component: COMPONENT,
      code: error.code,
      leafCode: error.leafCode,
      message: `${what} could not start: ${error.message}`,
      details: error.details,
      cause: error,
    });
  }
  return new LeafError({
    component: COMPONENT,
    code: ErrorCodes.UNAVAILABLE,
    message: `${what} could not start: ${message(error)}`,
    cause: error,
  });
}

function message(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
