// The checks every worker-id registry applies to what acquire() and report() are given, so that a
// bad request gets the same clear INVALID_ARGUMENT, naming the field, from every registry.
import { argumentError } from "./errors";
import type { AcquireRequest, BackupWorker, NodeIdentity } from "./registry";

/**
 * An {@link AcquireRequest} after {@link checkAcquireRequest}: every field checked, defaults set.
 */
export interface CheckedAcquireRequest {
  node: NodeIdentity;
  /** `"ip:port"`, the key Java Leaf files a node under. */
  key: string;
  /** Largest worker id the generator's layout can hold. */
  maxWorkerId: number;
  /** How many backup worker ids to lease with the primary one (0 when not asked). */
  backups: number;
  /** The one worker id asked for (`AcquireRequest.workerId`), undefined when any id will do. */
  workerId: number | undefined;
  signal: AbortSignal | undefined;
}

/** Narrower bounds a registry's storage sets on a request (a column's width, a path's rules). */
export interface AcquireRequestLimits {
  /** Longest `node.name` accepted, in characters (default: no limit). */
  maxNameLength?: number;
  /** Longest `node.ip` accepted, in characters (default: no limit). */
  maxIpLength?: number;
  /** Lowest `node.port` accepted (default 0; 1 where port 0 cannot name a node). */
  minPort?: number;
  /** Largest `maxWorkerId` accepted (default `Number.MAX_SAFE_INTEGER`). */
  maxWorkerIdLimit?: number;
  /**
   * True when the registry grants a requested `workerId` exactly (or refuses with
   * WORKER_ID_IN_USE). Default false: a request naming a worker id is refused with
   * INVALID_ARGUMENT.
   */
  requestedWorkerId?: boolean;
}

/**
 * Checks an acquire request: a node with a non-empty name and ip and a port up to 65535, an integer
 * maxWorkerId of 0 or more and an integer backups count of 0 or more, within `limits`. A requested
 * `workerId` must lie in 0..maxWorkerId, without backups, and is refused unless
 * `limits.requestedWorkerId` says the registry grants one. Throws INVALID_ARGUMENT (from
 * `component`) naming the first bad field, then the signal's reason when it is already aborted.
 * Returns the request with `backups` defaulted to 0 and the node's key.
 */
export function checkAcquireRequest(
  component: string,
  request: AcquireRequest,
  limits: AcquireRequestLimits = {},
): CheckedAcquireRequest {
  if (!request || typeof request !== "object") {
    throw argumentError(component, "request", request, "{ node, maxWorkerId, backups? }");
  }
  const { node, maxWorkerId } = request;
  if (!node || typeof node !== "object") {
    throw argumentError(component, "node", node, "{ name, ip, port }");
  }
  const maxName = limits.maxNameLength ?? Number.POSITIVE_INFINITY;
  if (typeof node.name !== "string" || node.name === "" || node.name.length > maxName) {
    throw argumentError(
      component,
      "node.name",
      node.name,
      `a non-empty service name${Number.isFinite(maxName) ? ` of at most ${maxName} characters` : ""}`,
    );
  }
  const maxIp = limits.maxIpLength ?? Number.POSITIVE_INFINITY;
  if (typeof node.ip !== "string" || node.ip === "" || node.ip.length > maxIp) {
    throw argumentError(
      component,
      "node.ip",
      node.ip,
      `the node's address, e.g. 10.1.46.33${Number.isFinite(maxIp) ? `, at most ${maxIp} characters` : ""}`,
    );
  }
  const minPort = limits.minPort ?? 0;
  if (!Number.isInteger(node.port) || node.port < minPort || node.port > 65535) {
    throw argumentError(component, "node.port", node.port, `a port from ${minPort} to 65535`);
  }
  const maxLimit = limits.maxWorkerIdLimit ?? Number.MAX_SAFE_INTEGER;
  if (!Number.isSafeInteger(maxWorkerId) || maxWorkerId < 0 || maxWorkerId > maxLimit) {
    throw argumentError(
      component,
      "maxWorkerId",
      maxWorkerId,
      maxLimit === Number.MAX_SAFE_INTEGER
        ? "an integer of 0 or more (the layout's maxWorkerId)"
        : `an integer from 0 to ${maxLimit} (the layout's maxWorkerId)`,
    );
  }
  const backups = request.backups ?? 0;
  if (!Number.isSafeInteger(backups) || backups < 0) {
    throw argumentError(component, "backups", backups, "an integer of 0 or more");
  }
  const workerId = request.workerId;
  if (workerId !== undefined) {
    if (!limits.requestedWorkerId) {
      throw argumentError(
        component,
        "workerId",
        workerId,
        "no requested worker id: this registry chooses the id itself; use a registry that grants a " +
          "requested id (postgres, redis, etcd, mysql in lease mode, zk in recycle mode), or leave " +
          "workerId out",
      );
    }
    if (!Number.isSafeInteger(workerId) || workerId < 0 || workerId > maxWorkerId) {
      throw argumentError(
        component,
        "workerId",
        workerId,
        `an integer from 0 to ${maxWorkerId} (the layout's maxWorkerId)`,
      );
    }
    if (backups > 0) {
      throw argumentError(
        component,
        "backups",
        backups,
        `0 with a requested worker id (${workerId}): a requested id is leased alone`,
      );
    }
  }
  request.signal?.throwIfAborted();
  return {
    node,
    key: `${node.ip}:${node.port}`,
    maxWorkerId,
    backups,
    workerId,
    signal: request.signal,
  };
}

/**
 * Checks a timestamp given to report() or release(): an integer of ms since the Unix epoch, 0 or
 * more. Throws INVALID_ARGUMENT (from `component`) naming `name`; returns the value.
 */
export function checkReportedTimestamp(component: string, name: string, value: unknown): number {
  if (typeof value !== "number" || !Number.isSafeInteger(value) || value < 0) {
    throw argumentError(component, name, value, "a timestamp in ms since the Unix epoch");
  }
  return value;
}

/**
 * Checks what a lease's report() is given: the primary id's timestamp, and backups that each name
 * one of the lease's backup ids with a valid timestamp. Throws INVALID_ARGUMENT (from `component`)
 * naming the bad one. Returns the timestamp to store per worker id, the primary's first (a backup
 * given twice keeps its highest).
 */
export function checkReport(
  component: string,
  lease: { readonly workerId: number; readonly backups: readonly BackupWorker[] },
  timestampMs: number,
  backups: readonly BackupWorker[] = [],
): Map<number, number> {
  const reported = new Map([
    [lease.workerId, checkReportedTimestamp(component, "timestampMs", timestampMs)],
  ]);
  for (const backup of backups) {
    const workerId = backup?.workerId;
    if (!lease.backups.some((b) => b.workerId === workerId)) {
      throw argumentError(
        component,
        "backups",
        workerId,
        `one of this lease's backup worker ids (${lease.backups.map((b) => b.workerId).join(", ") || "none"})`,
      );
    }
    const timestamp = checkReportedTimestamp(
      component,
      "backups[].lastTimestamp",
      backup.lastTimestamp,
    );
    reported.set(workerId, Math.max(reported.get(workerId) ?? 0, timestamp));
  }
  return reported;
}
