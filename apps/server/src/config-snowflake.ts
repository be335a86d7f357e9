// Snowflake mode's settings: where the worker id comes from (local, ZooKeeper, MySQL, Redis or etcd
// registry; a StatefulSet pod's ordinal), refused when two nodes could get the same id, and the bit
// layout with its overrides.
import { resolve } from "node:path";
import { defineLayout, isLeafError, type Layout, type LeafError, layouts } from "@leaf/core";
import {
  parseWorkIdMap,
  type StatefulSetId,
  statefulSetWorkerId,
  type WorkIdMap,
} from "@leaf/registry-local";
import { checkJavaLeafName } from "@leaf/registry-zk";
import type { ConfigKey } from "./config-keys";
import { mysqlSettings } from "./config-mysql";
import type { Placement } from "./config-segment";
import { sharedBackendKeys } from "./config-server";
import type { RegistrySettings, SnowflakeSettings } from "./config-types";
import { bareMessage, type ConfigValues } from "./config-values";

const LAYOUT_FIELDS = [
  "epoch",
  "unitMillis",
  "timestampBits",
  "workerBits",
  "sequenceBits",
] as const;

/**
 * Each registry's own address key. Naming one chooses that registry when snowflake.registry is left
 * out; naming one beside another registry is refused, so that no named registry is ever ignored.
 */
const REGISTRY_ADDRESS_KEYS = [
  ["zk", "snowflake.zk.address"],
  ["redis", "snowflake.redis.url"],
  ["etcd", "snowflake.etcd.url"],
  ["mysql", "snowflake.mysql.url"],
] as const satisfies ReadonlyArray<readonly [RegistrySettings["kind"], ConfigKey]>;

/** Snowflake mode's settings (the mode is enabled); undefined when a problem was noted. */
export function snowflakeSettings(v: ConfigValues, at: Placement): SnowflakeSettings | undefined {
  const pod = podSettings(v);
  const registry = registrySettings(v, at, pod);
  const layout = layoutSettings(v);
  if (pod && layout && pod.workerId > layout.maxWorkerId) {
    // Refused here rather than by the registry at start: the two keys that make the id are named.
    const key = pod.offset > 0 ? "snowflake.statefulSetOffset" : "snowflake.statefulSet";
    v.problem(
      key,
      `the pod's worker id ${pod.workerId} (HOSTNAME ${JSON.stringify(pod.hostname)}, ordinal ${pod.workerId - pod.offset}, plus ${v.label("snowflake.statefulSetOffset")} ${pod.offset}) is above the layout's largest worker id ${layout.maxWorkerId}; ` +
        "lower the offset, or give the StatefulSet fewer replicas",
    );
    return undefined;
  }
  if (pod && v.get("snowflake.backups") > 0) {
    // A requested id is leased alone: a registry refuses backups with it at start.
    v.problem(
      "snowflake.backups",
      `${v.label("snowflake.backups")} is ${v.get("snowflake.backups")}, but a StatefulSet pod (${v.label("snowflake.statefulSet")}) leases exactly its ordinal, without backup worker ids; remove snowflake.backups`,
    );
    return undefined;
  }
  if (!registry || !layout) return undefined;
  return {
    layout,
    registry,
    pod,
    ip: v.optional("snowflake.ip"),
    port: v.optional("snowflake.port"),
    toleranceMs: v.get("snowflake.clockToleranceMs"),
    backups: v.get("snowflake.backups"),
  };
}

/**
 * Whether the chosen registry grants a requested worker id (the pod's ordinal) under a lease, or
 * refuses it: Redis, etcd, MySQL lease mode, ZooKeeper recycle mode.
 */
function grantsRequestedId(
  v: ConfigValues,
  kind: RegistrySettings["kind"],
  zkMode: "normal" | "recycle" | undefined,
): boolean {
  if (kind === "mysql") return v.get("snowflake.mysql.mode") === "lease";
  if (kind === "zk") {
    return (v.optional("snowflake.zk.mode") ?? zkMode ?? v.get("snowflake.zk.mode")) === "recycle";
  }
  return kind === "redis" || kind === "etcd";
}

/** The pod whose StatefulSet ordinal (plus the offset) is the worker id, when snowflake.statefulSet. */
function podSettings(v: ConfigValues): SnowflakeSettings["pod"] {
  if (!v.get("snowflake.statefulSet")) {
    if (v.named("snowflake.statefulSetOffset")) {
      v.problem(
        "snowflake.statefulSetOffset",
        `${v.label("snowflake.statefulSetOffset")} is set but ${v.label("snowflake.statefulSet")} is not true, so no ordinal is offset; ` +
          "set snowflake.statefulSet=true, or remove the offset",
      );
    }
    return undefined;
  }
  try {
    const pod: StatefulSetId = statefulSetWorkerId(
      { offset: v.get("snowflake.statefulSetOffset") },
      v.env,
    );
    return { hostname: pod.hostname, offset: pod.offset, workerId: pod.workerId };
  } catch (error) {
    v.invalid("snowflake.statefulSet", error);
    return undefined;
  }
}

function registrySettings(
  v: ConfigValues,
  at: Placement,
  pod: SnowflakeSettings["pod"],
): RegistrySettings | undefined {
  const chosenRegistry = v.optional("snowflake.registry");
  const addressed = REGISTRY_ADDRESS_KEYS.filter(([, key]) => v.named(key));
  const labels = (keys: ReadonlyArray<readonly [string, ConfigKey]>) =>
    keys.map(([, key]) => v.label(key)).join(", ");
  if (chosenRegistry) {
    const ignored = addressed.filter(([kind]) => kind !== chosenRegistry.registry);
    if (ignored.length > 0) {
      v.problem(
        ignored[0]![1],
        `${v.label("snowflake.registry")} chooses the ${chosenRegistry.registry} registry, but ${labels(ignored)} names another registry, which would be ignored; ` +
          `remove ${ignored.length > 1 ? "them" : "it"}, or choose that registry`,
      );
    }
  } else if (addressed.length > 1) {
    v.problem(
      "snowflake.registry",
      `${labels(addressed)} name ${addressed.length} registries for the worker id; choose one with ${v.label("snowflake.registry")} and remove the others`,
    );
  }
  const kind = chosenRegistry?.registry ?? addressed[0]?.[0] ?? "local";
  const statefulSet = v.get("snowflake.statefulSet");
  const explicitLocalId =
    v.has("snowflake.local.workerId") || v.has("snowflake.local.workIdMap") || statefulSet;
  // Other nodes may share any of these: a default worker id would be everyone's.
  const shared = sharedBackendKeys(v);
  if (kind === "local" && v.javaLeafFile && !chosenRegistry) {
    v.problem(
      "snowflake.zk.address",
      `snowflake mode is on (${v.named("snowflake.enabled") ? v.label("snowflake.enabled") : "leaf.snowflake.enable defaults to true in Java Leaf"}) but no leaf.snowflake.zk.address is set. ` +
        "Set leaf.snowflake.zk.address and leaf.snowflake.port, or leaf.snowflake.enable=false, or choose a registry with leaf.snowflake.mode (local needs snowflake.local.workerId or leaf.snowflake.local.workIdMap)",
    );
  } else if (kind === "local" && !explicitLocalId && (!at.loopback || shared.length > 0)) {
    const why = !at.loopback
      ? `while listening on ${at.host}, reachable from other hosts`
      : `although the configuration names a shared store or registry (${shared.map((k) => v.label(k)).join(", ")}), which other servers, on this host too, share`;
    v.problem(
      "snowflake.local.workerId",
      `snowflake mode would use the local registry's default worker id 0 ${why}; two servers started like this hand out the same ids. ` +
        `Give each node its own id with ${v.label("snowflake.local.workerId")} (or leaf.snowflake.local.workIdMap), or use a registry (snowflake.registry=redis, etcd, mysql, or leaf.snowflake.zk.address), or snowflake.enabled=false`,
    );
  }
  if (statefulSet && kind === "local" && !chosenRegistry && shared.length > 0) {
    // Pods that share a store are one deployment: after a force-delete two pods of one ordinal on
    // different volumes would both issue its ids, which a shared registry would have refused.
    v.problem(
      "snowflake.statefulSet",
      `${v.label("snowflake.statefulSet")} without ${v.label("snowflake.registry")} would take the pod's ordinal with the local registry, guarded only by the pod's volume, ` +
        `although the configuration names a shared store or registry (${shared.map((k) => v.label(k)).join(", ")}); two pods of one ordinal on different volumes (a force-delete) would both issue its ids. ` +
        "Lease the ordinal with snowflake.registry=redis or etcd, mysql with snowflake.mysql.mode=lease, or zk with snowflake.zk.mode=recycle; or state snowflake.registry=local to accept the volume-only guard",
    );
  }
  if (statefulSet && kind !== "local" && !grantsRequestedId(v, kind, chosenRegistry?.zkMode)) {
    v.problem(
      "snowflake.statefulSet",
      `${v.label("snowflake.statefulSet")} asks the ${kind} registry${kind === "mysql" ? " in fixed mode" : kind === "zk" ? " in normal mode" : ""} for the pod's ordinal as its worker id, but that registry chooses ids itself; ` +
        "use snowflake.registry=redis or etcd, mysql with snowflake.mysql.mode=lease, or zk with snowflake.zk.mode=recycle (they lease exactly the ordinal, or refuse the start while another pod holds it), or leave snowflake.statefulSet out",
    );
  }
  if (kind === "local") {
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
      kind,
      workerId:
        pod?.workerId ?? (workIdMap === undefined ? v.get("snowflake.local.workerId") : undefined),
      workIdMap: pod ? undefined : workIdMap,
      dir: resolve(
        v.cwd,
        v.optional("snowflake.local.dir") ?? resolve(at.dataDir, "registry-local"),
      ),
    };
  }
  if (kind === "zk") {
    const address = v.optional("snowflake.zk.address");
    if (address === undefined) {
      if (!v.named("snowflake.zk.address")) {
        v.missing(
          "snowflake.zk.address",
          "the snowflake registry is zk, so ZooKeeper's address is needed",
        );
      }
      return undefined;
    }
    const mode =
      v.optional("snowflake.zk.mode") ?? chosenRegistry?.zkMode ?? v.get("snowflake.zk.mode");
    if (mode === "normal") {
      // Normal mode's tree is Java Leaf's: a name Java Leaf cannot run with blocks a rollback.
      try {
        checkJavaLeafName(v.get("name"), "name");
      } catch (error) {
        const { value, expected } = (error as LeafError).details;
        v.problem(
          "name",
          `invalid ${v.label("name")}: ${JSON.stringify(value)}; expected ${String(expected)}`,
        );
      }
    }
    return {
      kind,
      address,
      mode,
      sessionTimeoutMs: v.get("snowflake.zk.sessionTimeoutMs"),
      stopWithoutSession: v.get("snowflake.zk.stopWithoutSession"),
    };
  }
  if (kind === "redis") {
    // Its own URL, else the redis sequence's Redis.
    const urlKey = v.has("snowflake.redis.url") ? "snowflake.redis.url" : "redisSequence.url";
    const url = v.optional(urlKey);
    if (url === undefined) {
      if (!v.named(urlKey)) {
        v.missing(
          "snowflake.redis.url",
          "the snowflake registry is redis, so Redis's URL is needed (snowflake.redis.url, or redisSequence.url)",
        );
      }
      return undefined;
    }
    const keyPrefix = v.optional("snowflake.redis.keyPrefix");
    if (keyPrefix !== undefined && /[{}]/.test(keyPrefix)) {
      v.problem(
        "snowflake.redis.keyPrefix",
        `invalid ${v.label("snowflake.redis.keyPrefix")}: ${JSON.stringify(keyPrefix)}; expected no { or } (the service name is the keys' Redis Cluster hash tag)`,
      );
    }
    return { kind, url, keyPrefix, leaseMs: v.optional("snowflake.redis.leaseMs") };
  }
  if (kind === "etcd") {
    const url = v.optional("snowflake.etcd.url");
    if (url === undefined) {
      if (!v.named("snowflake.etcd.url")) {
        v.missing(
          "snowflake.etcd.url",
          "the snowflake registry is etcd, so etcd's client URL is needed",
        );
      }
      return undefined;
    }
    const prefix = v.optional("snowflake.etcd.prefix");
    if (prefix !== undefined && !/^\/\S*[^/\s]$/.test(prefix)) {
      v.problem(
        "snowflake.etcd.prefix",
        `invalid ${v.label("snowflake.etcd.prefix")}: ${JSON.stringify(prefix)}; expected a key prefix starting with "/", not ending with "/", without spaces`,
      );
    }
    return {
      kind,
      url,
      prefix,
      leaseTtlSeconds: v.optional("snowflake.etcd.leaseTtlSeconds"),
    };
  }
  // The MySQL registry: its own database keys, else the segment store's.
  const urlKey = v.has("snowflake.mysql.url") ? "snowflake.mysql.url" : "segment.mysql.url";
  const url = v.optional(urlKey);
  if (url === undefined) {
    if (!v.named(urlKey)) {
      v.missing(
        "snowflake.mysql.url",
        "the snowflake registry is mysql, so a database URL is needed (snowflake.mysql.url, or the segment's leaf.jdbc.url)",
      );
    }
    return undefined;
  }
  const userKey = v.has("snowflake.mysql.username")
    ? "snowflake.mysql.username"
    : "segment.mysql.username";
  const passwordKey = v.has("snowflake.mysql.password")
    ? "snowflake.mysql.password"
    : "segment.mysql.password";
  const settings = mysqlSettings(v, url, v.optional(userKey), v.optional(passwordKey), {
    url: urlKey,
    user: userKey,
    password: "snowflake.mysql.password",
  });
  if (!settings) return undefined;
  return {
    kind,
    mode: v.get("snowflake.mysql.mode"),
    leaseMs: v.optional("snowflake.mysql.leaseMs"),
    ...settings,
    table: undefined,
    createTable: v.get("snowflake.mysql.createTable"),
  };
}

/** The named layout, or a custom one when a field is overridden; undefined when that is invalid. */
function layoutSettings(v: ConfigValues): Layout | undefined {
  const base = layouts[v.get("snowflake.layout")];
  const fields = {
    name: base.name,
    timestampBits: v.optional("snowflake.timestampBits") ?? base.timestampBits,
    workerBits: v.optional("snowflake.workerBits") ?? base.workerBits,
    sequenceBits: v.optional("snowflake.sequenceBits") ?? base.sequenceBits,
    unitMillis: v.optional("snowflake.unitMillis") ?? base.unitMillis,
    epoch: v.optional("snowflake.epoch") ?? base.epoch,
  };
  if (LAYOUT_FIELDS.every((field) => fields[field] === base[field])) return base;
  try {
    return defineLayout({ ...fields, name: `${base.name} (custom)` });
  } catch (error) {
    const field = isLeafError(error) ? String(error.details.key ?? "") : "";
    const key: ConfigKey = (LAYOUT_FIELDS as readonly string[]).includes(field)
      ? (`snowflake.${field}` as ConfigKey)
      : "snowflake.timestampBits";
    v.problem(key, `invalid snowflake layout (${v.label(key)}): ${bareMessage(error)}`);
    return undefined;
  }
}
