// What a backend entry is: one object per segment store and per worker-id registry the server can
// use, with its kind name, its configuration keys, how it checks them, how it builds the adapter
// and what it tells health, metrics, capacity and the monitor. The server's configuration, wiring
// and reporting iterate over the entries listed in backends/index.ts; adding a backend is one file
// here plus one line there.
import type { WorkerIdRegistry } from "@leaf/core";
import type { SegmentStore } from "@leaf/segment";
import type { KeyDef } from "../config-def";
import type { ConfigKey } from "../config-keys";
import type { ServerConfig, SnowflakeSettings } from "../config-types";
import type { ConfigValues } from "../config-values";
import type { ServiceLogger, StoreMember } from "../service-types";

/** Where the server runs, as the backends' settings need it. */
export interface Placement {
  dataDir: string;
  host: string;
  /** True when `host` is reachable from this machine only. */
  loopback: boolean;
}

/** How a running backend shows itself on the monitor page, in health details and in the metrics. */
export interface BackendDescription {
  /** The entry's kind: "mysql", "embedded", "zk", ... */
  kind: string;
  /** Its mode when it has several ("normal", "lease", ...); "" otherwise. */
  mode: string;
  /** What it talks to, without secrets: "127.0.0.1:3306/leaf.leaf_alloc", a folder, ... */
  target: string;
  /** Shared by other servers (a database, a Redis, ...), rather than this node's own. */
  shared: boolean;
}

/** What every entry states. */
interface BackendBase<
  Kind extends string,
  S extends { kind: Kind },
  Keys extends readonly KeyDef[],
> {
  readonly kind: Kind;
  /** Its own configuration keys, in the order of the README's table. */
  readonly keys: Keys;
  /**
   * Keys that name this backend's address. When the mode's kind key (segment.store,
   * snowflake.registry) is not set, naming one of them chooses this backend; and a configuration
   * that names one of a shared backend is a deployment other hosts call (the server listens on
   * every interface, default worker ids are refused).
   */
  readonly addressKeys: readonly Keys[number]["key"][];
  /** Other servers may share it: the deployment guards treat it as such. */
  readonly shared: boolean;
  /** How it is shown (monitor, health, metrics). */
  describe(settings: S): BackendDescription;
  /**
   * A start error told in the server's keys rather than the library's options (a MySQL access
   * error names segment.mysql.username); the error as it is otherwise.
   */
  explainError?(error: unknown): unknown;
}

/** What a store's settings builder is told besides the values. */
export interface StoreChoice {
  /** segment.store was set (rather than the store chosen by its address, or by default). */
  stated: boolean;
}

/** What {@link StoreBackend.open} is given. */
export interface StoreContext {
  logger: ServiceLogger;
}

/** An operator command of a store: `leaf store NAME [VALUE]`, with the server's configuration. */
export interface StoreOperation<S> {
  readonly name: string;
  /** "lift-fence RAISE_BY": how it is written. */
  readonly usage: string;
  readonly doc: string;
  /** Runs it and answers what to print. */
  run(settings: S, value: string | undefined): Promise<string>;
}

/** A segment store the server can take ranges from. */
export interface StoreBackend<
  Kind extends string = string,
  S extends { kind: Kind } = { kind: Kind },
  Keys extends readonly KeyDef[] = readonly KeyDef[],
> extends BackendBase<Kind, S, Keys> {
  /** The store used when segment.store is not set and no store's address is named. */
  readonly fallback?: boolean;
  /**
   * Its storage is one process's (a folder it locks): with several worker processes
   * (server.workers) the primary process opens it and the workers take their ranges from it.
   */
  readonly oneProcess?: boolean;
  /** Its settings, the store being chosen; undefined when a problem was noted in `v`. */
  settings(v: ConfigValues, at: Placement, choice: StoreChoice): S | undefined;
  /**
   * Opens the store and checks it can serve (reachable, writable, its tables there), creating its
   * tables when the settings ask; a store that cannot serve fails the start here rather than
   * answering 503 to every request.
   */
  open(settings: S, context: StoreContext): Promise<SegmentStore>;
  /**
   * Builds the store without connecting or checking anything (`open` is this plus its checks): how
   * a store of several databases (a residue set) makes each one, so that a database down at start
   * joins once it answers. Absent for a store that cannot be such a database.
   */
  build?(settings: S): SegmentStore;
  /**
   * The databases of a store made of several (a residue set), as the running store (what `open`
   * returned) sees them now: which answer, each one's residue, ranges taken. Shown on the monitor
   * and in the metrics; absent for a store of one database.
   */
  members?(store: SegmentStore): StoreMember[];
  /** Operator commands (creating a namespace, lifting a fence), run by `leaf store`. */
  readonly operations?: readonly StoreOperation<S>[];
  /** Work on the opened store before the generator starts (the embedded store's demo tag). */
  prepare?(store: SegmentStore, settings: S, context: StoreContext): Promise<void>;
  /**
   * The name under which the node keeps its high-water marks for this store: the same for every
   * address of the same data (a failover to another host is judged by the marks taken before),
   * another for other data. Undefined: the node keeps no marks for it (a residue set, whose
   * databases' ids interleave: each database is judged by the store itself).
   */
  storeId(settings: S): string | undefined;
}

/** A registry chosen in snowflake.registry: its kind and the variant written, if any. */
export interface RegistryChoice {
  registry: string;
  /**
   * The fork's zk_normal / zk_recycle: the name as written when it is one of {@link
   * RegistryBackend.variants}.
   */
  variant?: string;
}

/** What a registry's settings builder is told besides the values. */
export interface RegistryContext {
  at: Placement;
  /** The StatefulSet pod whose ordinal is the worker id, when snowflake.statefulSet. */
  pod: SnowflakeSettings["pod"];
  /** What snowflake.registry says, when it is set. */
  chosen: RegistryChoice | undefined;
  /** Keys naming a shared store or registry (the configuration is a deployment others share). */
  shared: readonly ConfigKey[];
}

/** What {@link RegistryBackend.create} is given. */
export interface RegistryBuild {
  config: ServerConfig;
  snowflake: SnowflakeSettings;
  /** The worker process building it, when the server runs several (server.workers). */
  worker?: WorkerPlace;
}

/** One worker process of a server that runs several (server.workers). */
export interface WorkerPlace {
  /** 1 .. count: the same for a worker and the process that replaces it after it died. */
  slot: number;
  count: number;
}

/** A worker-id registry snowflake mode can take its worker id from. */
export interface RegistryBackend<
  Kind extends string = string,
  S extends { kind: Kind } = { kind: Kind },
  Keys extends readonly KeyDef[] = readonly KeyDef[],
> extends BackendBase<Kind, S, Keys> {
  /**
   * Other backends' address keys it reads when its own is not set (the MySQL registry's database
   * defaults to the segment store's): naming one of them is not an address ignored.
   */
  readonly borrows?: readonly string[];
  /** Other values snowflake.registry accepts for it (the fork's zk_normal, zk_recycle). */
  readonly variants?: readonly string[];
  /** The registry used when snowflake.registry is not set and no registry's address is named. */
  readonly fallback?: boolean;
  /** Its settings, the registry being chosen; undefined when a problem was noted in `v`. */
  settings(v: ConfigValues, context: RegistryContext): S | undefined;
  /**
   * True when it leases exactly a requested worker id (a StatefulSet pod's ordinal) or refuses it
   * while another node holds it; false when it chooses ids itself.
   */
  grantsRequestedId(settings: S): boolean;
  /**
   * How to choose it so that it leases a requested worker id, for messages that point there:
   * "redis", "zk with snowflake.zk.mode=recycle". Absent when it never does.
   */
  readonly leasingChoice?: string;
  /**
   * Whether it ever gives a worker id back (for capacity: ids never reused run out), and the
   * setting that would make it do so.
   */
  reuse(settings: S): { reused: boolean; configured: boolean; instead?: string };
  /** Builds the registry (its tables created when the settings ask). */
  create(settings: S, build: RegistryBuild): Promise<WorkerIdRegistry>;
}

/** The settings type of a store or registry entry. */
export type SettingsOf<B> = B extends
  | StoreBackend<string, infer S, readonly KeyDef[]>
  | RegistryBackend<string, infer S, readonly KeyDef[]>
  ? S
  : never;
