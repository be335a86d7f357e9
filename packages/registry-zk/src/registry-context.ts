// What the two modes need from the registry that runs them (its options, sessions, the leases it
// must end on close); in its own file so that the registry and the modes do not import each other.
import type { ResolvedOptions } from "./options";
import type { ZkSession } from "./zk-session";

/** A lease the registry must end when it closes. */
export interface TrackedLease {
  /** Ends the lease without a final report: `lost` aborts, its session closes. */
  shutdown(why: string): Promise<void>;
}

/** What the modes need from the registry. */
export interface RegistryContext {
  readonly options: ResolvedOptions;
  /** Aborted when the registry closes. */
  readonly closed: AbortSignal;
  /** Opens a session (rejects UNAVAILABLE when no server answers within connectTimeoutMs). */
  openSession(signal: AbortSignal): Promise<ZkSession>;
  /**
   * Normal mode: the `{name}/{ip}:{port}` of nodes this registry has seen held by another process
   * (a marker of another session at an acquire, or taken from a lease). Such a node is never
   * started from its cache file (ZooKeeper unreachable) until an acquire through ZooKeeper grants
   * it again: the other process may still issue under the id.
   */
  readonly contested: Set<string>;
  track(lease: TrackedLease): void;
  untrack(lease: TrackedLease): void;
}
