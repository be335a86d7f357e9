// Kubernetes without an API call: a StatefulSet gives its pods stable names `<set name>-<ordinal>`
// (web-0, web-1, ...), set as the pod's HOSTNAME, and each pod keeps its own volume across
// restarts and rescheduling. The ordinal is a worker id no other pod of the set holds; an offset
// lets several StatefulSets share one worker-id space (set A 0..99, set B 100..199). The lock and
// cache files go on the pod's volume, so the last timestamp follows the pod wherever it runs.
import { configError } from "@leaf/core";
import { COMPONENT } from "./work-id-map";

/** Where a pod's worker id comes from: its StatefulSet ordinal plus an offset. */
export interface StatefulSetOptions {
  /** The pod's name (default: the HOSTNAME environment variable, which Kubernetes sets to it). */
  hostname?: string;
  /** Added to the ordinal, for several StatefulSets sharing one worker-id space (default 0). */
  offset?: number;
}

/** DNS-1123 label ending in `-<ordinal>`: what Kubernetes names a StatefulSet's pods. */
const POD_NAME = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?-(0|[1-9][0-9]{0,8})$/;

/** The worker id of this pod, `offset + ordinal`, with how it was found (for messages). */
export interface StatefulSetId {
  workerId: number;
  hostname: string;
  ordinal: number;
  offset: number;
}

/**
 * Reads the pod's ordinal from its name. Throws INVALID_CONFIG naming the value when the name is
 * missing or is not a StatefulSet pod's (`<set name>-<ordinal>`), or the offset is not an integer
 * of 0 or more.
 */
export function statefulSetWorkerId(
  options: StatefulSetOptions | true,
  env: NodeJS.ProcessEnv = process.env,
): StatefulSetId {
  const given = options === true ? {} : options;
  if (typeof given !== "object" || given === null) {
    throw configError(COMPONENT, "statefulSet", options, "true, or { hostname?, offset? }");
  }
  const offset = given.offset ?? 0;
  if (!Number.isSafeInteger(offset) || offset < 0) {
    throw configError(COMPONENT, "statefulSet.offset", offset, "an integer of 0 or more");
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
  return { workerId: offset + ordinal, hostname, ordinal, offset };
}
