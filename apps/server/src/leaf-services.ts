// Starts the id sources the configuration asks for (segment generator and its store, snowflake
// worker and its registry, redis sequence) and closes them in the right order. Registries and Redis
// are imported only when configured, so an unused mode loads nothing.
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
import { EmbeddedSegmentStore, SegmentIdGenerator, type SegmentStore } from "@leaf/segment";
import { MysqlSegmentStore } from "@leaf/segment-mysql";
import type { ServerConfig } from "./config";
import { envName } from "./config-keys";
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

// The shapes of the running services live in service-types.ts (the metrics read them too).
export type * from "./service-types";

/** Options of {@link startServices}. */
export interface StartServicesOptions {
  config: ServerConfig;
  metrics: ServerMetrics;
  logger: ServiceLogger;
  /** The port the server listens on: the node's port in the registry unless configured. */
  port: number;
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
  { config, metrics, logger }: StartServicesOptions,
  closers: Array<() => Promise<void>>,
): Promise<SegmentMode> {
  const settings = config.segment!;
  let raw: SegmentStore;
  if (settings.store === "embedded") {
    try {
      const embedded = new EmbeddedSegmentStore({
        dir: settings.dir,
        // A write that could not be stored (disk full, journal replaced): no range is handed out
        // until the journal is verified again; an operator has to look.
        onFailure: (error) =>
          logger.error(
            { err: error, dir: settings.dir },
            "embedded segment store refuses ranges: a journal write failed or the folder is no longer this process's",
          ),
      });
      await embedded.start();
      raw = embedded;
    } catch (error) {
      throw startFailure(`segment mode (embedded store in ${settings.dir})`, error);
    }
  } else {
    const mysql = settings.mysql!;
    const store = new MysqlSegmentStore({
      url: mysql.url,
      user: mysql.user,
      password: mysql.password,
      table: mysql.table,
    });
    try {
      if (mysql.createTable) await store.createSchema();
      // A user without UPDATE, a missing table or a read-only server fails the start here rather
      // than serving 503 on every request.
      await store.checkAccess();
    } catch (error) {
      await store.close().catch(() => {});
      throw startFailure("segment mode", withServerKeys(error, "segment.mysql"));
    }
    raw = store;
  }
  const store = new InstrumentedStore(raw, metrics);
  const generator = new SegmentIdGenerator({
    store,
    refreshIntervalMs: settings.refreshIntervalMs,
    exhaustedWaitMs: settings.exhaustedWaitMs,
    dynamicStep: settings.dynamicStep,
    prefetch: { maxDepth: settings.prefetchMaxDepth },
    giveBackOnClose: settings.giveBackOnClose,
    // The end of the highest range taken per tag, on disk: after a restart a max_id moved back
    // below it (a hand edit, a promoted replica that missed writes) is refused, not served again.
    highWater: { dir: settings.highWaterDir, storeId: segmentStoreId(settings) },
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
    if (settings.store === "embedded" && settings.demoTag !== null) {
      const tags = await store.listTags();
      if (!tags.includes(settings.demoTag)) {
        await createDemoTag(store, settings.demoTag, logger);
      }
    }
    await generator.start();
  } catch (error) {
    throw startFailure("segment mode", error);
  }
  const loaded = generator.snapshots().filter((s) => s.initialized).length;
  logger.info(
    { store: store.kind, tags: generator.tags().length, loaded },
    `segment mode ready on the ${store.kind} store: ${generator.tags().length} tag(s)`,
  );
  return { generator, store };
}

/**
 * Creates Java Leaf's demo row (insert into leaf_alloc values('leaf-segment-test', 1, 2000, ...)),
 * unless an operator deleted the tag: the store refuses it below the max id it was deleted with,
 * and a deleted demo tag reads as "not wanted", so it stays deleted and the start goes on.
 */
async function createDemoTag(
  store: SegmentStore,
  tag: string,
  logger: ServiceLogger,
): Promise<void> {
  try {
    await store.createTag({
      tag,
      step: 2000,
      startId: 1n,
      description: "Test leaf Segment Mode Get Id",
    });
    logger.info({ tag }, `created the demo tag ${tag}`);
  } catch (error) {
    const details = (error as { details?: { reason?: unknown; minStartId?: unknown } }).details;
    if (!isLeafError(error, ErrorCodes.ALREADY_EXISTS) || details?.reason !== "deleted")
      throw error;
    logger.warn(
      { tag, minStartId: details.minStartId },
      `the demo tag ${tag} was deleted (max id ${String(details.minStartId)}): not created again. ` +
        `Set segment.demoTag to "" (${envName("segment.demoTag")}="") to silence this, or create the tag ` +
        `with a startId of at least ${String(details.minStartId)}`,
    );
  }
}

async function startSnowflake(
  { config, metrics, logger, port }: StartServicesOptions,
  closers: Array<() => Promise<void>>,
): Promise<SnowflakeMode> {
  const settings = config.snowflake!;
  const node: NodeIdentity = {
    name: config.name,
    ip: settings.ip ?? localIPv4(),
    port: settings.port ?? port,
  };
  let registry: WorkerIdRegistry;
  try {
    registry = await createRegistry(config);
  } catch (error) {
    throw startFailure(
      `snowflake mode (${config.snowflake!.registry.kind} registry)`,
      withServerKeys(error, "snowflake.mysql"),
    );
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
      // A StatefulSet pod asks a shared registry for its ordinal (the local registry is given it).
      ...(settings.pod && settings.registry.kind !== "local"
        ? { workerId: settings.pod.workerId }
        : {}),
      startToleranceMs: settings.toleranceMs,
      generator: { rollbackToleranceMs: settings.toleranceMs, onClockRollback },
      onEvent,
    });
    await worker.start();
  } catch (error) {
    throw startFailure(
      `snowflake mode (${registry.kind} registry, node ${node.ip}:${node.port})`,
      registry.kind === "mysql" ? withServerKeys(error, "snowflake.mysql") : error,
    );
  }
  closers.push(() => worker.close());
  logger.info(
    { registry: registry.kind, workerId: worker.generator.activeWorkerId, node },
    `snowflake mode ready: worker id ${worker.generator.activeWorkerId} from the ${registry.kind} registry`,
  );
  return { worker, registry, layout: settings.layout, node, events };
}

async function createRegistry(config: ServerConfig): Promise<WorkerIdRegistry> {
  const settings = config.snowflake!.registry;
  switch (settings.kind) {
    case "local": {
      const { LocalRegistry } = await import("@leaf/registry-local");
      return new LocalRegistry({
        dir: settings.dir,
        toleranceMs: config.snowflake!.toleranceMs,
        ...(config.snowflake!.pod
          ? {
              statefulSet: {
                hostname: config.snowflake!.pod.hostname,
                offset: config.snowflake!.pod.offset,
              },
            }
          : settings.workIdMap !== undefined
            ? { workIdMap: settings.workIdMap as Record<string, number> }
            : { workerId: settings.workerId ?? 0 }),
      });
    }
    case "zk": {
      const { ZookeeperRegistry } = await import("@leaf/registry-zk");
      return new ZookeeperRegistry({
        url: settings.address,
        mode: settings.mode,
        sessionTimeoutMs: settings.sessionTimeoutMs,
        stopWithoutSession: settings.stopWithoutSession,
        clockToleranceMs: config.snowflake!.toleranceMs,
      });
    }
    case "mysql": {
      const { MysqlRegistry } = await import("@leaf/registry-mysql");
      const registry = new MysqlRegistry({
        mode: settings.mode,
        ...(settings.leaseMs !== undefined ? { leaseMs: settings.leaseMs } : {}),
        url: settings.url,
        user: settings.user,
        password: settings.password,
        toleranceMs: config.snowflake!.toleranceMs,
        cacheDir: `${config.dataDir}/registry-mysql`,
      });
      if (settings.createTable) {
        try {
          await registry.createSchema();
        } catch (error) {
          await registry.close().catch(() => {});
          throw error;
        }
      }
      return registry;
    }
    case "redis": {
      const { RedisRegistry } = await import("@leaf/registry-redis");
      return new RedisRegistry({
        url: settings.url,
        ...(settings.keyPrefix !== undefined ? { keyPrefix: settings.keyPrefix } : {}),
        ...(settings.leaseMs !== undefined ? { leaseMs: settings.leaseMs } : {}),
        toleranceMs: config.snowflake!.toleranceMs,
      });
    }
    case "etcd": {
      const { EtcdRegistry } = await import("@leaf/registry-etcd");
      return new EtcdRegistry({
        url: settings.url,
        ...(settings.prefix !== undefined ? { prefix: settings.prefix } : {}),
        ...(settings.leaseTtlSeconds !== undefined
          ? { leaseTtlSeconds: settings.leaseTtlSeconds }
          : {}),
      });
    }
  }
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

/** `key (ENV_NAME)`: how an operator finds a setting. */
function keyText(key: string): string {
  return `${key} (${envName(key)})`;
}

/**
 * A MySQL error from a store or registry with its fix told in the server's keys rather than the
 * library's options (`details.mysql` is the class core's MySQL layer gave it).
 */
function withServerKeys(error: unknown, prefix: "segment.mysql" | "snowflake.mysql"): unknown {
  if (!isLeafError(error) || typeof error.details.problem !== "string") return error;
  const table = prefix === "segment.mysql" ? "sql/leaf_alloc.sql" : "the registry's sql/ file";
  const credentials = `check ${keyText(`${prefix}.username`)} / ${keyText(`${prefix}.password`)}`;
  const fixes: Record<string, string> = {
    unreachable: `check that the server is up and that ${keyText(`${prefix}.url`)} names it (host and port)`,
    "read-only": `point ${keyText(`${prefix}.url`)} at the primary, or make the server writable (SET GLOBAL read_only = OFF)`,
  };
  const kind = String(error.details.mysql);
  const errno = error.details.errno;
  let fix = fixes[kind];
  if (kind === "access") {
    fix =
      errno === 1045
        ? credentials
        : errno === 1044
          ? `check the database in ${keyText(`${prefix}.url`)}, or grant the user its rights on it; else ${credentials}`
          : `${String(error.details.fix)}; else ${credentials}`;
  } else if (kind === "schema") {
    fix =
      errno === 1049
        ? `check the database in ${keyText(`${prefix}.url`)}, or create it (CREATE DATABASE ...)`
        : `set ${keyText(`${prefix}.createTable`)} to true to create it at start, or run ${table}`;
  }
  if (fix === undefined) return error;
  return new LeafError({
    component: error.component,
    code: error.code,
    leafCode: error.leafCode,
    message: `${error.details.problem}; ${fix}`,
    details: { ...error.details, fix },
    cause: error,
  });
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
