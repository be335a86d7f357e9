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
  /** The store's databases when it has several (its entry's `members`), read now. */
  members?: () => StoreMember[];
}

/** One database of a segment store made of several (a residue set), as the monitor shows it. */
export interface StoreMember {
  /** Its address without secrets ("127.0.0.1:3306/leaf.leaf_alloc"): its name in messages. */
  name: string;
  /** Its store's kind: "mysql", "postgres". */
  kind: string;
  /** True while it answers: its residue read and checked, its last call successful. */
  up: boolean;
  /** serving, unverified, refused (its residue is wrong for the set), backoff, stalled. */
  state: string;
  /** Databases in the set, and this one's class: it hands out ids `id % delta === remainder`. */
  delta: number | null;
  remainder: number | null;
  /** The set's generation it was formed at (one more at each database added). */
  epoch: number | null;
  /** Ranges this node took from it. */
  rangesTaken: number;
  /** Failed calls in a row; the last error, null after a success. */
  failures: number;
  lastError: string | null;
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
  /**
   * Stops the worker (last report, lease released), the generator and Redis; then the registry and
   * store.
   */
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
