// The local registry: a worker id from the configuration (snowflake.local.workerId, the fork's
// workIdMap, or a StatefulSet pod's ordinal), guarded by a lock file in dataDir. Nothing is shared,
// so a default id is refused wherever another server could have it too.
import { resolve } from "node:path";
import { parseWorkIdMap, type WorkIdMap } from "@leaf/registry-local";
import { def } from "../config-def";
import { integer, json, nonEmpty } from "../config-readers";
import type { RegistryBackend } from "./backend";
import { leasingRegistries, REGISTRIES } from "./index";

/** "zk, mysql, redis, etcd": the registries other servers share. */
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
    const explicitId =
      v.has("snowflake.local.workerId") || v.has("snowflake.local.workIdMap") || statefulSet;
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
        "snowflake.local.workerId",
        `snowflake mode would use the local registry's default worker id 0 ${why}; two servers started like this hand out the same ids. ` +
          `Give each node its own id with ${v.label("snowflake.local.workerId")} (or leaf.snowflake.local.workIdMap), or use a registry (snowflake.registry=${sharedRegistries()}), or snowflake.enabled=false`,
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
    if (statefulSet && (workIdMap !== undefined || v.has("snowflake.local.workerId"))) {
      v.problem(
        "snowflake.statefulSet",
        `${v.label("snowflake.statefulSet")} takes the worker id from the pod's name; remove ${workIdMap !== undefined ? v.label("snowflake.local.workIdMap") : v.label("snowflake.local.workerId")}`,
      );
    }
    return {
      kind: "local",
      workerId:
        pod?.workerId ?? (workIdMap === undefined ? v.get("snowflake.local.workerId") : undefined),
      workIdMap: pod ? undefined : workIdMap,
      dir: resolve(
        v.cwd,
        v.optional("snowflake.local.dir") ?? resolve(at.dataDir, "registry-local"),
      ),
    };
  },
  // It is given the ordinal (the pod's volume guards it), rather than leasing it.
  grantsRequestedId: () => true,
  reuse: () => ({ reused: false, configured: true }),
  async create(settings, { snowflake }) {
    const { LocalRegistry } = await import("@leaf/registry-local");
    return new LocalRegistry({
      dir: settings.dir,
      toleranceMs: snowflake.toleranceMs,
      ...(snowflake.pod
        ? { statefulSet: { hostname: snowflake.pod.hostname, offset: snowflake.pod.offset } }
        : settings.workIdMap !== undefined
          ? { workIdMap: settings.workIdMap as Record<string, number> }
          : { workerId: settings.workerId ?? 0 }),
    });
  },
  describe: (settings) => ({
    kind: "local",
    mode: "configured",
    target: settings.dir,
    shared: false,
  }),
};
