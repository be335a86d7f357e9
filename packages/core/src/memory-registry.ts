// A worker-id registry held in process memory: for tests, single-process tools, and as the smallest
// complete example of the contract. Several MemoryRegistry instances sharing one store stand for
// several nodes sharing one backing service.
import { checkAcquireRequest } from "./acquire-request";
import { ErrorCodes, LeafError } from "./errors";
import { LeaseCore } from "./lease-core";
import type {
  AcquireRequest,
  BackupWorker,
  NodeIdentity,
  WorkerIdRegistry,
  WorkerLease,
} from "./registry";

const COMPONENT = "registry-memory";

interface WorkerRecord {
  /** "ip:port" of the node it was last given to; it gets it back first. */
  owner: string;
  lastTimestamp: number;
  /** The live lease holding it, if any. */
  holder: MemoryLease | undefined;
}

/** The shared state behind {@link MemoryRegistry} instances: worker records per service name. */
export class MemoryRegistryStore {
  readonly spaces = new Map<string, Map<number, WorkerRecord>>();

  /** Takes worker id `workerId` of service `name` away from its holder (simulates a lost lease). */
  revoke(name: string, workerId: number, why = "revoked"): boolean {
    const record = this.spaces.get(name)?.get(workerId);
    if (!record?.holder) return false;
    const holder = record.holder;
    record.holder = undefined;
    holder.revoke(why);
    return true;
  }
}

/** Options of {@link MemoryRegistry}. */
export interface MemoryRegistryOptions {
  /** Share one store between instances to stand for one backing service (default: a new one). */
  store?: MemoryRegistryStore;
}

/**
 * A {@link WorkerIdRegistry} in memory. A node gets back the id it had, else the lowest free one;
 * a requested id exactly, or WORKER_ID_IN_USE while another lease holds it.
 */
export class MemoryRegistry implements WorkerIdRegistry {
  readonly kind = "memory";
  readonly store: MemoryRegistryStore;
  private closed = false;

  constructor(options: MemoryRegistryOptions = {}) {
    this.store = options.store ?? new MemoryRegistryStore();
  }

  async acquire(request: AcquireRequest): Promise<WorkerLease> {
    if (this.closed) {
      throw new LeafError({
        component: COMPONENT,
        code: ErrorCodes.CLOSED,
        message: "registry is closed",
      });
    }
    const {
      node,
      key,
      maxWorkerId,
      backups: backupCount,
      workerId: requested,
    } = checkAcquireRequest("registry-memory", request, { requestedWorkerId: true });
    let space = this.store.spaces.get(node.name);
    if (!space) {
      space = new Map();
      this.store.spaces.set(node.name, space);
    }
    const chosen: number[] = [];
    const free = (id: number) => !space.get(id)?.holder && !chosen.includes(id);
    if (requested !== undefined) {
      const holder = space.get(requested)?.holder;
      if (holder) {
        throw new LeafError({
          component: COMPONENT,
          code: ErrorCodes.WORKER_ID_IN_USE,
          message: `worker id ${requested} requested by ${key} is held by ${holder.node.ip}:${holder.node.port}`,
          details: { workerId: requested, node: key },
        });
      }
      chosen.push(requested);
    }
    // Ids this node had before come first, in id order; then never-held or free ids.
    const own = [...space.entries()].filter(([, r]) => r.owner === key).map(([id]) => id);
    for (const id of own.sort((a, b) => a - b)) {
      if (chosen.length <= backupCount && id <= maxWorkerId && free(id)) chosen.push(id);
    }
    for (let id = 0; id <= maxWorkerId && chosen.length <= backupCount; id++) {
      const record = space.get(id);
      if (free(id) && (!record || record.owner === key || !record.holder)) chosen.push(id);
    }
    if (chosen.length <= backupCount) {
      throw new LeafError({
        component: COMPONENT,
        code: ErrorCodes.WORKER_IDS_EXHAUSTED,
        message: `no free worker id in 0..${maxWorkerId} for ${key} (service ${node.name}): all are leased`,
      });
    }
    const granted = chosen.map((id) => {
      const record = space.get(id) ?? { owner: key, lastTimestamp: 0, holder: undefined };
      record.owner = key;
      space.set(id, record);
      return { workerId: id, lastTimestamp: record.lastTimestamp };
    });
    const lease = new MemoryLease(space, granted[0]!, granted.slice(1), node);
    for (const id of chosen) space.get(id)!.holder = lease;
    return lease;
  }

  async close(): Promise<void> {
    this.closed = true;
  }
}

/** A worker id held in memory: its store calls are map updates. */
class MemoryLease extends LeaseCore {
  constructor(
    private readonly space: Map<number, WorkerRecord>,
    primary: BackupWorker,
    backups: readonly BackupWorker[],
    readonly node: NodeIdentity,
  ) {
    super({ component: COMPONENT, ...primary, backups });
  }

  /** Ends the lease because the store took its id away. */
  revoke(why: string): void {
    this.lose(why);
  }

  private record(id: number): WorkerRecord | undefined {
    const record = this.space.get(id);
    return record?.holder === this ? record : undefined;
  }

  protected async store(reported: ReadonlyMap<number, number>): Promise<void> {
    for (const [workerId, timestamp] of reported) {
      const record = this.record(workerId);
      if (record) record.lastTimestamp = Math.max(record.lastTimestamp, timestamp);
    }
  }

  protected async free(finalTimestampMs: number | undefined): Promise<void> {
    if (finalTimestampMs !== undefined && !this.lost.aborted) {
      await this.store(new Map([[this.workerId, finalTimestampMs]]));
    }
    for (const id of this.heldIds()) {
      const record = this.record(id);
      if (record) record.holder = undefined;
    }
  }
}
