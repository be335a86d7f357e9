// The checked configuration of a server, as loadConfig() returns it: one settings type per mode
// (a disabled mode is undefined), read by the server, the services and the start-up summary.
import type { Layout } from "@leaf/core";
import type { SettingsOf } from "./backends/backend";
import type { REGISTRIES, SEGMENT_STORES } from "./backends/index";

/** Pino's levels. */
export type LogLevel = "fatal" | "error" | "warn" | "info" | "debug" | "trace" | "silent";

/** The settings of the segment store in use (one entry of backends/index.ts, told by `kind`). */
export type StoreSettings = SettingsOf<(typeof SEGMENT_STORES)[number]>;

/** Segment mode settings. */
export interface SegmentSettings {
  /** The store's kind: "embedded", "mysql", ... */
  store: StoreSettings["kind"];
  /** The store's own settings. */
  backend: StoreSettings;
  /** Folder of the node's high-water marks (the end of the highest range taken, per tag). */
  highWaterDir: string;
  refreshIntervalMs: number;
  exhaustedWaitMs: number;
  dynamicStep: boolean;
  /** Most ranges ready ahead per tag (1: Java Leaf's double buffer). */
  prefetchMaxDepth: number;
  /** Give unused ids back to the store on a graceful stop. */
  giveBackOnClose: boolean;
  /** When first ranges are taken (`segment.load`), the hot tags and the recent window. */
  load: "eager" | "lazy" | "recent";
  eagerTags: string[];
  recentMs: number;
}

/** Where the snowflake worker id comes from: one registry entry's settings, told by `kind`. */
export type RegistrySettings = SettingsOf<(typeof REGISTRIES)[number]>;

/** Snowflake mode settings. */
export interface SnowflakeSettings {
  layout: Layout;
  registry: RegistrySettings;
  /** Node address in the registry; undefined: the first non-loopback IPv4. */
  ip: string | undefined;
  /** Node port in the registry; undefined: the listening port. */
  port: number | undefined;
  toleranceMs: number;
  backups: number;
  /**
   * The pod when the worker id is its StatefulSet ordinal plus the offset (snowflake.statefulSet):
   * the local registry's fixed id, or the id requested from a shared registry. With several worker
   * processes (server.workers) the pod holds a block of ids, `workerIds[slot - 1]` for worker
   * process `slot` (`offset + ordinal * workers + slot - 1`).
   */
  pod:
    | { hostname: string; offset: number; ordinal: number; workerIds: readonly number[] }
    | undefined;
}

/** Redis sequence settings. */
export interface RedisSequenceSettings {
  url: string;
  namespace: string;
  prefix: string;
  timeZone: string;
  batchSize: number | undefined;
}

/** The checked configuration of a server. A disabled mode is undefined. */
export interface ServerConfig {
  name: string;
  dataDir: string;
  logLevel: LogLevel;
  server: {
    host: string;
    port: number;
    maxBatch: number;
    adminToken: string | undefined;
    accessTokens: Map<string, string[]> | undefined;
    requestLog: boolean;
    /** Why the server listens where it does, for the start banner. */
    hostReason: string;
    /** ms of drain on SIGTERM before the port closes (see server.drainMs). */
    drainMs: number;
    shutdownTimeoutMs: number;
    monitor: boolean;
    /** Worker processes serving the port (server.workers, `auto` resolved): 1 is one process. */
    workers: number;
  };
  segment: SegmentSettings | undefined;
  snowflake: SnowflakeSettings | undefined;
  redisSequence: RedisSequenceSettings | undefined;
  /** Where values came from, for the start-up log. */
  sources: string[];
  /**
   * Things that were ignored (keys of other programs in a .properties file, unknown LEAF_
   * variables).
   */
  warnings: string[];
  /**
   * LEAF_* variables that are not Leaf keys, each with the closest key's variable when one is near
   * (a typo). Ignored when serving; `--check` fails on them.
   */
  unknownVariables: Array<{ name: string; suggestion: string | undefined }>;
}
