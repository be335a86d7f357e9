// The local registry: a worker id from the configuration (snowflake.local.workerId, the fork's
// workIdMap, or a StatefulSet pod's ordinal), guarded by a lock file in dataDir. Nothing is shared,
// so a default id is refused wherever another server could have it too.
import { resolve } from "node:path";
import { parseWorkIdMap, type WorkIdMap } from "@leaf/registry-local";
import { def } from "../config-def";
import { integer, json, nonEmpty, workerIdList } from "../config-readers";
import type { ConfigValues } from "../config-values";
import type { RegistryBackend } from "./backend";
import { leasingRegistries, REGISTRIES } from "./index";

/** "zk, mysql, postgres, redis, etcd": the registries other servers share. */
function sharedRegistries(): string {
  return REGISTRIES.flatMap((r) => (r.shared ? [r.kind] : [])).join(", ");
}

export const LOCAL_REGISTRY_KEYS = [
  def("snowflake.local.workerId", {
    type: "integer",
    default: 0,
    defaultText: "0 (when no workIdMap; loopback only, no shared store or registry)",
    doc: "Local registry: this node's worker id. Must be set explicitly when the server listens beyond loopback or any shared store or registry is configured (segment.mysql.url, redisSequence.url, ...).",
    read: integer(0, 4_194_303),
  }),
  def("snowflake.local.workIdMap", {
    aliases: ["leaf.snowflake.local.workIdMap"],
    type: 'JSON {"ip:port": id}',
    defaultText: "(none)",
    doc: 'Local registry: the fork\'s map of nodes to worker ids, `{"10.1.46.33:8080":1,"10.1.46.33:8081":2}`.',
    read: json('a JSON object like {"10.1.46.33:8080": 1, "10.1.46.33:8081": 2}'),
  }),
  def("snowflake.local.workerIds", {
    type: "worker ids, comma-separated (or a list)",
    defaultText: "0, 1, ... (loopback only, no shared store or registry)",
    doc: "Local registry with several worker processes (server.workers): one worker id per process, in order (`5,6`); each process holds its own id's lock. Must be set explicitly where snowflake.local.workerId must.",
    read: workerIdList,
  }),
  def("snowflake.local.dir", {
    type: "folder path",
    defaultText: "dataDir/registry-local",
    doc: "Local registry: folder of its lock and cache files.",
    read: nonEmpty("a folder path"),
  }),
] as const;

/** The local registry's settings. */
export interface LocalRegistrySettings {
  kind: "local";
  workerId: number | undefined;
  workIdMap: unknown;
  /** With several worker processes (server.workers): worker process k holds the k-th id. */
  workerIds: number[] | undefined;
  dir: string;
}

export const localRegistry: RegistryBackend<
  "local",
  LocalRegistrySettings,
  typeof LOCAL_REGISTRY_KEYS
> = {
  kind: "local",
  keys: LOCAL_REGISTRY_KEYS,
  addressKeys: [],
  shared: false,
  fallback: true,
  settings(v, { at, pod, chosen, shared }) {
    const statefulSet = v.get("snowflake.statefulSet");
    const workers = v.get("server.workers");
    const workerIds = v.optional("snowflake.local.workerIds");
    const explicitId =
      v.has("snowflake.local.workerId") ||
      v.has("snowflake.local.workIdMap") ||
      workerIds !== undefined ||
      statefulSet;
    const idKey = workers > 1 ? "snowflake.local.workerIds" : "snowflake.local.workerId";
    if (v.javaLeafFile && !chosen) {
      v.problem(
        "snowflake.zk.address",
        `snowflake mode is on (${v.named("snowflake.enabled") ? v.label("snowflake.enabled") : "leaf.snowflake.enable defaults to true in Java Leaf"}) but no leaf.snowflake.zk.address is set. ` +
          "Set leaf.snowflake.zk.address and leaf.snowflake.port, or leaf.snowflake.enable=false, or choose a registry with leaf.snowflake.mode (local needs snowflake.local.workerId or leaf.snowflake.local.workIdMap)",
      );
    } else if (!explicitId && (!at.loopback || shared.length > 0)) {
      // Other nodes may share any of these: a default worker id would be everyone's.
      const why = !at.loopback
        ? `while listening on ${at.host}, reachable from other hosts`
        : `although the configuration names a shared store or registry (${shared.map((k) => v.label(k)).join(", ")}), which other servers, on this host too, share`;
      v.problem(
        idKey,
        `snowflake mode would use the local registry's default worker id${workers > 1 ? `s 0..${workers - 1}` : " 0"} ${why}; two servers started like this hand out the same ids. ` +
          `Give each node its own id${workers > 1 ? `s, one per worker process, with ${v.label("snowflake.local.workerIds")}` : ` with ${v.label("snowflake.local.workerId")} (or leaf.snowflake.local.workIdMap)`}, or use a registry (snowflake.registry=${sharedRegistries()}), or snowflake.enabled=false`,
      );
    }
    if (statefulSet && !chosen && shared.length > 0) {
      // Pods that share a store are one deployment: after a force-delete two pods of one ordinal on
      // different volumes would both issue its ids, which a shared registry would have refused.
      v.problem(
        "snowflake.statefulSet",
        `${v.label("snowflake.statefulSet")} without ${v.label("snowflake.registry")} would take the pod's ordinal with the local registry, guarded only by the pod's volume, ` +
          `although the configuration names a shared store or registry (${shared.map((k) => v.label(k)).join(", ")}); two pods of one ordinal on different volumes (a force-delete) would both issue its ids. ` +
          `Lease the ordinal with ${leasingRegistries()}; or state snowflake.registry=local to accept the volume-only guard`,
      );
    }
    const workIdMap = v.optional("snowflake.local.workIdMap");
    const perWorker = localWorkerIds(v, workers, workerIds, workIdMap !== undefined);
    if (workIdMap !== undefined && v.has("snowflake.local.workerId")) {
      v.problem(
        "snowflake.local.workerId",
        `${v.label("snowflake.local.workerId")} and ${v.label("snowflake.local.workIdMap")} are both set; keep one`,
      );
    }
    if (workIdMap !== undefined) {
      try {
        parseWorkIdMap(workIdMap as WorkIdMap, "workIdMap");
      } catch (error) {
        v.invalid("snowflake.local.workIdMap", error);
      }
    }
    // A StatefulSet pod's ids come from its name (a block of server.workers ids per ordinal): an id
    // given here as well would be ignored.
    const given = (
      [
        "snowflake.local.workIdMap",
        "snowflake.local.workerId",
        "snowflake.local.workerIds",
      ] as const
    ).filter((key) => v.named(key));
    if (statefulSet && given.length > 0) {
      v.problem(
        "snowflake.statefulSet",
        `${v.label("snowflake.statefulSet")} takes the worker id${workers > 1 ? "s" : ""} from the pod's name${workers > 1 ? ` (a block of ${workers}, one per worker process)` : ""}; remove ${given.map((key) => v.label(key)).join(" and ")}, which would be ignored`,
      );
    }
    return {
      kind: "local",
      workerId:
        pod?.workerIds[0] ??
        (workIdMap === undefined
          ? (workerIds?.[0] ?? v.get("snowflake.local.workerId"))
          : undefined),
      workIdMap: pod ? undefined : workIdMap,
      workerIds: pod ? undefined : perWorker,
      dir: resolve(
        v.cwd,
        v.optional("snowflake.local.dir") ?? resolve(at.dataDir, "registry-local"),
      ),
    };
  },
  // It is given the ordinal (the pod's volume guards it), rather than leasing it.
  grantsRequestedId: () => true,
  reuse: () => ({ reused: false, configured: true }),
  async create(settings, { snowflake, worker }) {
    const { LocalRegistry } = await import("@leaf/registry-local");
    // Worker process k of a server holds the k-th id (each id has its own lock file).
    const workerId =
      worker !== undefined && settings.workerIds !== undefined
        ? settings.workerIds[worker.slot - 1]
        : settings.workerId;
    return new LocalRegistry({
      dir: settings.dir,
      toleranceMs: snowflake.toleranceMs,
      ...(snowflake.pod
        ? {
            statefulSet: {
              hostname: snowflake.pod.hostname,
              offset: snowflake.pod.offset,
              // Worker process k of the pod holds the k-th id of its ordinal's block.
              processes: snowflake.pod.workerIds.length,
              process: (worker?.slot ?? 1) - 1,
            },
          }
        : settings.workIdMap !== undefined
          ? { workIdMap: settings.workIdMap as Record<string, number> }
          : { workerId: workerId ?? 0 }),
    });
  },
  describe: (settings) => ({
    kind: "local",
    mode: "configured",
    target: settings.dir,
    shared: false,
  }),
};

/**
 * The worker id of each worker process when server.workers is above 1: the ones listed in
 * snowflake.local.workerIds, or 0..workers-1 by default (refused off loopback above). One id for
 * several processes, or the fork's map (one id per ip:port, which the processes share), is refused
 * naming its key: each process must hold an id of its own. Undefined for one process.
 */
function localWorkerIds(
  v: ConfigValues,
  workers: number,
  listed: number[] | undefined,
  withMap: boolean,
): number[] | undefined {
  if (listed !== undefined && (v.has("snowflake.local.workerId") || withMap)) {
    v.problem(
      "snowflake.local.workerIds",
      `${v.label("snowflake.local.workerIds")} and ${v.label(withMap ? "snowflake.local.workIdMap" : "snowflake.local.workerId")} are both set; keep one`,
    );
    return undefined;
  }
  if (listed !== undefined && listed.length !== workers) {
    v.problem(
      "snowflake.local.workerIds",
      `${v.label("snowflake.local.workerIds")} lists ${listed.length} worker id(s) (${listed.join(", ")}) but ${v.label("server.workers")} runs ${workers} worker process(es); list exactly one id per process`,
    );
    return undefined;
  }
  if (listed !== undefined && new Set(listed).size !== listed.length) {
    v.problem(
      "snowflake.local.workerIds",
      `${v.label("snowflake.local.workerIds")} lists a worker id twice (${listed.join(", ")}); two worker processes with one id hand out the same ids: list distinct ids`,
    );
    return undefined;
  }
  if (workers === 1) return undefined;
  if (v.has("snowflake.local.workerId")) {
    v.problem(
      "snowflake.local.workerId",
      `${v.label("snowflake.local.workerId")} gives one worker id, but ${v.label("server.workers")} runs ${workers} worker processes, and each must hold an id of its own; ` +
        `list one per process in snowflake.local.workerIds (e.g. ${[0, 1].map((i) => v.get("snowflake.local.workerId") + i).join(",")}), or use a registry that leases ids (snowflake.registry=${sharedRegistries()})`,
    );
    return undefined;
  }
  if (withMap) {
    v.problem(
      "snowflake.local.workIdMap",
      `${v.label("snowflake.local.workIdMap")} gives one worker id per ip:port, but ${v.label("server.workers")} runs ${workers} worker processes on this ip:port; ` +
        "list one id per process in snowflake.local.workerIds instead",
    );
    return undefined;
  }
  return listed ?? Array.from({ length: workers }, (_, i) => i);
}
