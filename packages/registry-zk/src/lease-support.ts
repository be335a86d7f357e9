// Pieces both modes' leases share: request checks, the errors they raise, reports run one at a
// time, and reading the server's clock around a write for the peer clock check.
import {
  type AcquireRequest,
  type BackupWorker,
  type CheckedAcquireRequest,
  type Clock,
  checkAcquireRequest,
  checkReportedTimestamp,
  ErrorCodes,
  LeafCodes,
  LeafError,
} from "@leaf/core";
import { COMPONENT } from "./options";
import { checkNodeForPaths } from "./paths";

/**
 * Checks an acquire request: what every registry checks (ports from 1: a node is named by its
 * ip:port), then ZooKeeper's path rules on the node. Throws INVALID_ARGUMENT naming the bad field.
 */
export function checkRequest(request: AcquireRequest): CheckedAcquireRequest {
  const checked = checkAcquireRequest(COMPONENT, request, { minPort: 1 });
  checkNodeForPaths(checked.node);
  return checked;
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

/**
 * Raises the reported timestamps of a lease's ids (primary first) after checking them; backups that
 * are not this lease's are ignored. Never lowers a timestamp.
 */
export function noteReported(
  slots: { workerId: number; reported: number }[],
  timestampMs: number,
  backups: readonly BackupWorker[] | undefined,
): void {
  checkReportedTimestamp(COMPONENT, "timestampMs", timestampMs);
  const primary = slots[0]!;
  primary.reported = Math.max(primary.reported, timestampMs);
  for (const backup of backups ?? []) {
    const slot = slots.find((s) => s.workerId === backup?.workerId);
    if (slot && slot !== primary) {
      slot.reported = Math.max(
        slot.reported,
        checkReportedTimestamp(COMPONENT, "backups", backup.lastTimestamp),
      );
    }
  }
}
