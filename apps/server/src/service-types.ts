// The running services as the HTTP layer, the metrics and the monitor see them: one shape per
// mode. Types only, so that the metrics and the services that feed them need not import each other.
import type {
  Layout,
  NodeIdentity,
  SnowflakeWorker,
  SnowflakeWorkerEvent,
  WorkerIdRegistry,
} from "@leaf/core";
import type { RedisSequence } from "@leaf/redis-sequence";
import type { SegmentIdGenerator, SegmentStore } from "@leaf/segment";
import type { ServerConfig } from "./config-types";

/** The little of a logger the services use (pino's, in the server). */
export interface ServiceLogger {
  info(object: object, message?: string): void;
  warn(object: object, message?: string): void;
  error(object: object, message?: string): void;
}

/** Segment mode, running. */
export interface SegmentMode {
  generator: SegmentIdGenerator;
  /** The store, instrumented (the admin API and the monitor's table go through it). */
  store: SegmentStore;
}

/** One lease event kept for the monitor page. */
export interface LeaseEventRecord {
  at: number;
  type: SnowflakeWorkerEvent["type"] | "clock-rollback";
  text: string;
}

/** Snowflake mode, running. */
export interface SnowflakeMode {
  worker: SnowflakeWorker;
  registry: WorkerIdRegistry;
  layout: Layout;
  node: NodeIdentity;
  /** The last lease events and clock rollbacks, newest last (at most 20). */
  events: LeaseEventRecord[];
}

/** Redis sequence, running. */
export interface RedisSequenceMode {
  sequence: RedisSequence;
  /** Default prefix of the string form. */
  prefix: string;
}

/** Everything the HTTP layer serves ids from. A disabled mode is undefined. */
export interface LeafServices {
  segment: SegmentMode | undefined;
  snowflake: SnowflakeMode | undefined;
  redisSequence: RedisSequenceMode | undefined;
  /** Stops the worker (last report, lease released), the generator and Redis; then the registry and store. */
  close(): Promise<void>;
}

/**
 * What the metrics and the capacity watch read of a running server: a narrow view of AppContext
 * (id-sources.ts), so that those files need not import the route layer.
 */
export interface ServerView {
  config: ServerConfig;
  services: LeafServices | undefined;
  version: string;
}
