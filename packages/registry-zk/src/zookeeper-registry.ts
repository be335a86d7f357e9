// The registry object: options, one ZooKeeper session per lease, and the dispatch to the mode that
// hands out ids (normal: Java Leaf's fixed id per ip:port; recycle: leased, reusable ids).
import type { AcquireRequest, WorkerIdRegistry, WorkerLease } from "@leaf/core";
import { checkRequest, registryClosed } from "./lease-support";
import { acquireNormal } from "./normal-mode";
import { type ResolvedOptions, resolveOptions, type ZookeeperRegistryOptions } from "./options";
import { acquireRecycled } from "./recycle-mode";
import type { RegistryContext, TrackedLease } from "./registry-context";
import { type SessionSettings, ZkSession } from "./zk-session";

/**
 * Worker ids on ZooKeeper. In normal mode the tree is Java Leaf's own, so a Java Leaf deployment
 * can be replaced node by node with every worker id kept; in recycle mode ids are leased through
 * ephemeral nodes and reused once their holder is gone (containers whose ip:port changes).
 *
 * Each acquire opens its own session; `release` ends it, and `close` ends any still open.
 */
export class ZookeeperRegistry implements WorkerIdRegistry {
  /** "zk". */
  readonly kind = "zk";
  /** "normal" or "recycle". */
  readonly mode: ResolvedOptions["mode"];
  private readonly options: ResolvedOptions;
  private readonly settings: SessionSettings;
  private readonly leases = new Set<TrackedLease>();
  /** See {@link RegistryContext.contested}: kept across acquires, as the worker reacquires. */
  private readonly contested = new Set<string>();
  private readonly closing = new AbortController();

  /** Checks the options (INVALID_CONFIG naming the key); connects only when acquiring. */
  constructor(options: ZookeeperRegistryOptions) {
    this.options = resolveOptions(options);
    this.mode = this.options.mode;
    this.settings = {
      servers: this.options.servers,
      chroot: this.options.chroot,
      sessionTimeoutMs: this.options.sessionTimeoutMs,
      connectTimeoutMs: this.options.connectTimeoutMs,
      operationTimeoutMs: this.options.operationTimeoutMs,
      silenceLimitMs: this.options.silenceLimitMs,
      auth: this.options.auth,
      acls: this.options.acls,
    };
  }

  /**
   * Grants a worker id to `request.node` (see the README for each mode's rules). Rejects with a
   * LeafError: WORKER_IDS_EXHAUSTED, WORKER_ID_IN_USE, CLOCK_BEHIND_LEASE, CLOCK_SKEW, UNAVAILABLE,
   * INVALID_ARGUMENT, INVALID_CONFIG (the name is used by the other mode, or ZooKeeper refused the
   * credentials), CORRUPT_DATA, CLOSED.
   */
  async acquire(request: AcquireRequest): Promise<WorkerLease> {
    if (this.closing.signal.aborted) throw registryClosed();
    // Recycle mode can lease a requested id; normal mode's id belongs to the node's ip:port.
    const checked = checkRequest(request, this.options.mode === "recycle");
    const signal = checked.signal
      ? AbortSignal.any([checked.signal, this.closing.signal])
      : this.closing.signal;
    const context: RegistryContext = {
      options: this.options,
      closed: this.closing.signal,
      contested: this.contested,
      openSession: (s) => ZkSession.open(this.settings, s),
      track: (lease) => {
        if (this.closing.signal.aborted) void lease.shutdown("the registry was closed");
        else this.leases.add(lease);
      },
      untrack: (lease) => this.leases.delete(lease),
    };
    const request2 = { ...checked, signal };
    return this.options.mode === "recycle"
      ? acquireRecycled(context, request2)
      : acquireNormal(context, request2);
  }

  /**
   * Closes every session still open. Leases not released first end at once: their `lost` aborts
   * (LEASE_LOST), and recycled ids become free. Idempotent.
   */
  async close(): Promise<void> {
    if (!this.closing.signal.aborted) this.closing.abort(registryClosed());
    const leases = [...this.leases];
    this.leases.clear();
    await Promise.all(leases.map((lease) => lease.shutdown("the registry was closed")));
  }
}
