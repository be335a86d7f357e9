// The WORKER_IDS_EXHAUSTED error of registries that lease ids for a time (MySQL lease mode,
// PostgreSQL, Redis): what was asked, which lease ends soonest, and that ids come back a lease
// after their holder stops.
import type { CheckedAcquireRequest } from "./acquire-request";
import { ErrorCodes, LeafError } from "./errors";

/** The held lease that ends soonest, as the store reports it. */
export interface SoonestLease {
  workerId: number | string;
  ip: string;
  port: number | string;
  /** ms until it ends unless renewed, by the store's clock. */
  ms: number | string;
}

/**
 * WORKER_IDS_EXHAUSTED for `request` (1 + its backups ids wanted, none free in 0..maxWorkerId):
 * names the soonest lease to end when known, says ids come back `leaseMs` after their holder stops
 * renewing, and suggests more worker bits.
 */
export function workerIdsExhaustedError(
  component: string,
  request: CheckedAcquireRequest,
  leaseMs: number,
  soonest?: SoonestLease,
): LeafError {
  const need = 1 + request.backups;
  const next = soonest
    ? `; the soonest lease to end is worker id ${soonest.workerId} (${soonest.ip}:${soonest.port}) in ${soonest.ms} ms unless renewed`
    : "";
  return new LeafError({
    component,
    code: ErrorCodes.WORKER_IDS_EXHAUSTED,
    message:
      `no ${need === 1 ? "free worker id" : `${need} free worker ids`} in 0..${request.maxWorkerId} ` +
      `for ${request.key} (service ${request.node.name}): all are leased${next}. Ids come back ` +
      `${leaseMs} ms after their holder stops renewing; use a layout with more worker bits ` +
      "if the fleet is larger than the range",
    details: { maxWorkerId: request.maxWorkerId, node: request.key, backups: request.backups },
  });
}
