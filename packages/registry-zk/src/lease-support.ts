// Pieces both modes' leases share: request checks, the errors they raise, reports run one at a
// time, and reading the server's clock around a write for the peer clock check.
import {
  type AcquireRequest,
  argumentError,
  type Clock,
  ErrorCodes,
  LeafCodes,
  LeafError,
} from "@leaf/core";
import { COMPONENT } from "./options";
import { checkNode } from "./paths";

/** A checked acquire request. */
export interface CheckedRequest extends AcquireRequest {
  backups: number;
}

/** Checks an acquire request; throws INVALID_ARGUMENT naming the bad field. */
export function checkRequest(request: AcquireRequest): CheckedRequest {
  if (!request || typeof request !== "object") {
    throw argumentError(COMPONENT, "request", request, "{ node, maxWorkerId, backups? }");
  }
  checkNode(request.node);
  const max = request.maxWorkerId;
  if (typeof max !== "number" || !Number.isSafeInteger(max) || max < 0) {
    throw argumentError(
      COMPONENT,
      "maxWorkerId",
      max,
      "a non-negative integer (the layout's maxWorkerId)",
    );
  }
  const backups = request.backups ?? 0;
  if (typeof backups !== "number" || !Number.isSafeInteger(backups) || backups < 0) {
    throw argumentError(COMPONENT, "backups", backups, "a non-negative integer");
  }
  request.signal?.throwIfAborted();
  return { ...request, backups };
}

/** Checks a reported timestamp; throws INVALID_ARGUMENT. */
export function checkTimestamp(name: string, value: unknown): number {
  if (typeof value !== "number" || !Number.isSafeInteger(value) || value < 0) {
    throw argumentError(COMPONENT, name, value, "a timestamp in ms since the Unix epoch");
  }
  return value;
}

/** The LEASE_LOST error (Leaf code -4) for worker id `workerId`. */
export function leaseLost(workerId: number, why: string, cause?: unknown): LeafError {
  return new LeafError({
    component: COMPONENT,
    code: ErrorCodes.LEASE_LOST,
    leafCode: LeafCodes.LEASE_LOST,
    message: `worker id ${workerId} lease lost: ${why}; no id may be issued under it any more`,
    details: { workerId },
    cause,
  });
}

/** The error of a report on a released lease. */
export function releasedError(workerId: number): LeafError {
  return new LeafError({
    component: COMPONENT,
    code: ErrorCodes.CLOSED,
    message: `worker id ${workerId} lease was released; acquire a new one`,
    details: { workerId },
  });
}

/** The error of an acquire on a closed registry. */
export function registryClosed(): LeafError {
  return new LeafError({
    component: COMPONENT,
    code: ErrorCodes.CLOSED,
    message: "the ZooKeeper registry is closed; create a new one",
  });
}

/** Runs tasks one after another (reports and the release of one lease). */
export class Serial {
  private tail: Promise<unknown> = Promise.resolve();

  run<T>(task: () => Promise<T>): Promise<T> {
    const result = this.tail.then(task, task);
    this.tail = result.catch(() => {});
    return result;
  }

  /** Resolves once every task queued so far has settled. */
  idle(): Promise<void> {
    return this.tail.then(() => {});
  }
}

/**
 * Reads this node's clock around `write` and pairs it with the server time `write` returns: the
 * midpoint of the two readings stands for the instant the server stamped.
 */
export async function clockPair(
  clock: Clock,
  write: () => Promise<number>,
): Promise<{ now: number; serverNow: number }> {
  const before = clock.now();
  const serverNow = await write();
  const after = clock.now();
  return { now: Math.round((before + after) / 2), serverNow };
}
