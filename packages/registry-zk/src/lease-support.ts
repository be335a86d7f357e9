// Pieces both modes share: request checks, the closed-registry error, and reading the server's
// clock around a write for the peer clock check. (What their leases share is @leaf/core/adapter's
// LeaseCore.)
import { type AcquireRequest, type Clock, ErrorCodes, LeafError } from "@leaf/core";
import { type CheckedAcquireRequest, checkAcquireRequest } from "@leaf/core/adapter";
import { COMPONENT } from "./options";
import { checkNodeForPaths } from "./paths";

/**
 * Checks an acquire request: what every registry checks (ports from 1: a node is named by its
 * ip:port), then ZooKeeper's path rules on the node. A requested worker id is accepted only when
 * `requestedWorkerId` (recycle mode). Throws INVALID_ARGUMENT naming the bad field.
 */
export function checkRequest(
  request: AcquireRequest,
  requestedWorkerId: boolean,
): CheckedAcquireRequest {
  const checked = checkAcquireRequest(COMPONENT, request, { minPort: 1, requestedWorkerId });
  checkNodeForPaths(checked.node);
  return checked;
}

/** The error of an acquire on a closed registry. */
export function registryClosed(): LeafError {
  return new LeafError({
    component: COMPONENT,
    code: ErrorCodes.CLOSED,
    message: "the ZooKeeper registry is closed; create a new one",
  });
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
