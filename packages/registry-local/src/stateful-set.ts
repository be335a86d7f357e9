// Kubernetes without an API call: a StatefulSet gives its pods stable names `<set name>-<ordinal>`
// (web-0, web-1, ...), set as the pod's HOSTNAME, and each pod keeps its own volume across
// restarts and rescheduling. The ordinal is a worker id no other pod of the set holds; an offset
// lets several StatefulSets share one worker-id space (set A 0..99, set B 100..199). A pod that runs
// several processes (a server's worker processes) holds a block of ids: `processes` ids from
// `offset + ordinal * processes`, one per process, so every pod of the set must run the same number.
// The lock and cache files go on the pod's volume, so the last timestamp follows the pod wherever it
// runs.
import { configError } from "@leaf/core";
import { COMPONENT } from "./work-id-map";

/** Where a pod's worker id comes from: its StatefulSet ordinal plus an offset. */
export interface StatefulSetOptions {
  /** The pod's name (default: the HOSTNAME environment variable, which Kubernetes sets to it). */
  hostname?: string;
  /** Added to the ordinal, for several StatefulSets sharing one worker-id space (default 0). */
  offset?: number;
  /**
   * Processes per pod, each holding a worker id of its own (default 1): a pod's ids are
   * `offset + ordinal * processes` and the `processes - 1` after it. The same in every pod of the set.
   */
  processes?: number;
  /** Which of the pod's processes this is, 0 .. processes - 1 (default 0). */
  process?: number;
}

/** DNS-1123 label ending in `-<ordinal>`: what Kubernetes names a StatefulSet's pods. */
const POD_NAME = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?-(0|[1-9][0-9]{0,8})$/;

/**
 * The worker id of this pod's process, `offset + ordinal * processes + process`, with how it was
 * found (for messages).
 */
export interface StatefulSetId {
  workerId: number;
  hostname: string;
  ordinal: number;
  offset: number;
  processes: number;
  process: number;
}

/**
 * Reads the pod's ordinal from its name. Throws INVALID_CONFIG naming the value when the name is
 * missing or is not a StatefulSet pod's (`<set name>-<ordinal>`), the offset is not an integer of 0
 * or more, or the process is not one of `processes`.
 */
export function statefulSetWorkerId(
  options: StatefulSetOptions | true,
  env: NodeJS.ProcessEnv = process.env,
): StatefulSetId {
  const given = options === true ? {} : options;
  if (typeof given !== "object" || given === null) {
    throw configError(
      COMPONENT,
      "statefulSet",
      options,
      "true, or { hostname?, offset?, processes?, process? }",
    );
  }
  const offset = given.offset ?? 0;
  if (!Number.isSafeInteger(offset) || offset < 0) {
    throw configError(COMPONENT, "statefulSet.offset", offset, "an integer of 0 or more");
  }
  const processes = given.processes ?? 1;
  if (!Number.isSafeInteger(processes) || processes < 1) {
    throw configError(COMPONENT, "statefulSet.processes", processes, "an integer of 1 or more");
  }
  const index = given.process ?? 0;
  if (!Number.isSafeInteger(index) || index < 0 || index >= processes) {
    throw configError(
      COMPONENT,
      "statefulSet.process",
      index,
      `an integer from 0 to ${processes - 1} (statefulSet.processes is ${processes})`,
    );
  }
  const hostname = given.hostname ?? env.HOSTNAME;
  if (hostname === undefined || hostname === "") {
    throw configError(
      COMPONENT,
      "statefulSet.hostname",
      hostname,
      "the pod's name: the HOSTNAME environment variable is not set (Kubernetes sets it in every " +
        "pod); give statefulSet.hostname",
    );
  }
  const match = POD_NAME.exec(hostname);
  if (!match) {
    throw configError(
      COMPONENT,
      "statefulSet.hostname",
      hostname,
      'a StatefulSet pod name "<set name>-<ordinal>" such as "leaf-0" (a Deployment\'s pods have ' +
        "random suffixes and no stable ordinal: run Leaf as a StatefulSet, or use another registry)",
    );
  }
  const ordinal = Number(match[2]);
  return {
    workerId: offset + ordinal * processes + index,
    hostname,
    ordinal,
    offset,
    processes,
    process: index,
  };
}
