// Snowflake mode's settings: where the worker id comes from (one of backends/index.ts's registries,
// chosen by snowflake.registry or by the one whose address is named; a StatefulSet pod's ordinal),
// refused when two nodes could get the same id, and the bit layout with its overrides.
import { defineLayout, isLeafError, type Layout, layouts } from "@leaf/core";
import { bareMessage } from "@leaf/core/adapter";
import { type StatefulSetId, statefulSetWorkerId } from "@leaf/registry-local";
import type { Placement } from "./backends/backend";
import { leasingRegistries, REGISTRIES, registryBackend } from "./backends/index";
import type { ConfigKey } from "./config-keys";
import { sharedBackendKeys } from "./config-server";
import type { RegistrySettings, SnowflakeSettings } from "./config-types";
import type { ConfigValues } from "./config-values";

const LAYOUT_FIELDS = [
  "epoch",
  "unitMillis",
  "timestampBits",
  "workerBits",
  "sequenceBits",
] as const;

/** Snowflake mode's settings (the mode is enabled); undefined when a problem was noted. */
export function snowflakeSettings(v: ConfigValues, at: Placement): SnowflakeSettings | undefined {
  const pod = podSettings(v);
  const registry = registrySettings(v, at, pod);
  const layout = layoutSettings(v);
  const highest = pod?.workerIds.at(-1) ?? -1;
  if (pod && layout && highest > layout.maxWorkerId) {
    // Refused here rather than by the registry at start: the keys that make the id are named.
    const workers = pod.workerIds.length;
    const key = pod.offset > 0 ? "snowflake.statefulSetOffset" : "snowflake.statefulSet";
    v.problem(
      key,
      `the pod's ${workers > 1 ? "last " : ""}worker id ${highest} (HOSTNAME ${JSON.stringify(pod.hostname)}, ordinal ${pod.ordinal}${workers > 1 ? ` x ${workers} worker processes (${v.label("server.workers")}) + ${workers - 1}` : ""}, plus ${v.label("snowflake.statefulSetOffset")} ${pod.offset}) is above the layout's largest worker id ${layout.maxWorkerId}; ` +
        `lower the offset, or give the StatefulSet fewer replicas${workers > 1 ? " or each pod fewer worker processes" : ""}`,
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
 * The pod whose StatefulSet ordinal (plus the offset) is the worker id, when snowflake.statefulSet.
 */
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
  const written = v.writtenValue("server.workers");
  if (typeof written === "string" && written.trim() === "auto") {
    // The block of ids per ordinal is server.workers wide: pods whose widths differ overlap.
    v.problem(
      "server.workers",
      `${v.label("server.workers")} is auto (${v.get("server.workers")} on this machine), but with ${v.label("snowflake.statefulSet")} each pod holds a block of server.workers worker ids from ordinal x server.workers, which must be the same width in every pod of the set, whatever its machine's cores; ` +
        "give a number (the same in every pod)",
    );
    return undefined;
  }
  try {
    // One id per worker process, in a block of server.workers ids per ordinal (registry-local's
    // statefulSetWorkerId), so that pods running as many worker processes each never meet.
    const processes = v.get("server.workers");
    const ids: StatefulSetId[] = Array.from({ length: processes }, (_, process) =>
      statefulSetWorkerId(
        { offset: v.get("snowflake.statefulSetOffset"), processes, process },
        v.env,
      ),
    );
    const first = ids[0]!;
    return {
      hostname: first.hostname,
      offset: first.offset,
      ordinal: first.ordinal,
      workerIds: ids.map((id) => id.workerId),
    };
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
  const chosen = v.optional("snowflake.registry");
  const addressed = REGISTRIES.flatMap((registry) =>
    registry.addressKeys.filter((key) => v.named(key)).map((key) => [registry.kind, key] as const),
  );
  const labels = (keys: ReadonlyArray<readonly [string, ConfigKey]>) =>
    keys.map(([, key]) => v.label(key)).join(", ");
  if (chosen) {
    const ignored = addressed.filter(([kind]) => kind !== chosen.registry);
    if (ignored.length > 0) {
      v.problem(
        ignored[0]![1],
        `${v.label("snowflake.registry")} chooses the ${chosen.registry} registry, but ${labels(ignored)} names another registry, which would be ignored; ` +
          `remove ${ignored.length > 1 ? "them" : "it"}, or choose that registry`,
      );
    }
  } else if (addressed.length > 1) {
    v.problem(
      "snowflake.registry",
      `${labels(addressed)} name ${addressed.length} registries for the worker id; choose one with ${v.label("snowflake.registry")} and remove the others`,
    );
  }
  const entry = registryBackend(
    chosen?.registry ??
      addressed[0]?.[0] ??
      REGISTRIES.find((r) => "fallback" in r && r.fallback)!.kind,
  );
  // Other nodes may share any of these: a default worker id would be everyone's.
  const settings = entry.settings(v, { at, pod, chosen, shared: sharedBackendKeys(v) }) as
    | RegistrySettings
    | undefined;
  if (settings && v.get("snowflake.statefulSet") && !entry.grantsRequestedId(settings)) {
    v.problem(
      "snowflake.statefulSet",
      `${v.label("snowflake.statefulSet")} asks the ${entry.kind} registry in ${entry.describe(settings).mode} mode for the pod's ordinal as its worker id, but that registry chooses ids itself; ` +
        `use ${leasingRegistries()} (they lease exactly the ordinal, or refuse the start while another pod holds it), or leave snowflake.statefulSet out`,
    );
  }
  return settings;
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
