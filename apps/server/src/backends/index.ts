// Every backend the server can use, one entry each (see backend.ts). A new store or registry is a
// file in this folder and one line below; the configuration keys, the checks, the wiring and the
// monitor, metrics, health and capacity reporting all come from the entries.
import type { ServerConfig } from "../config-types";
import type { BackendDescription, RegistryBackend, StoreBackend } from "./backend";
import { embeddedStore } from "./embedded-store";
import { etcdRegistry } from "./etcd-registry";
import { localRegistry } from "./local-registry";
import { mysqlRegistry } from "./mysql-registry";
import { mysqlStore } from "./mysql-store";
import { postgresRegistry } from "./postgres-registry";
import { postgresStore } from "./postgres-store";
import { redisRegistry } from "./redis-registry";
import { redisStore } from "./redis-store";
import { residueStore } from "./residue-store";
import { zkRegistry } from "./zk-registry";

/** Segment stores, in the order the README lists them. */
export const SEGMENT_STORES = [
  embeddedStore,
  mysqlStore,
  postgresStore,
  redisStore,
  residueStore,
] as const;

/** Worker-id registries, in the order the README lists them. */
export const REGISTRIES = [
  localRegistry,
  zkRegistry,
  mysqlRegistry,
  postgresRegistry,
  redisRegistry,
  etcdRegistry,
] as const;

/** The entry of the store of kind `kind`. */
export function storeBackend(kind: string): StoreBackend<string, { kind: string }> {
  const entry = SEGMENT_STORES.find((b) => b.kind === kind);
  if (!entry) throw new Error(`no segment store of kind ${JSON.stringify(kind)}`);
  return entry as unknown as StoreBackend<string, { kind: string }>;
}

/** The entry of the registry of kind `kind`. */
export function registryBackend(kind: string): RegistryBackend<string, { kind: string }> {
  const entry = REGISTRIES.find((b) => b.kind === kind);
  if (!entry) throw new Error(`no worker-id registry of kind ${JSON.stringify(kind)}`);
  return entry as unknown as RegistryBackend<string, { kind: string }>;
}

/** How the configured store and registry show themselves (monitor, health, metrics). */
export function describeBackends(
  config: ServerConfig,
): Array<BackendDescription & { role: "segment-store" | "registry" }> {
  const described: Array<BackendDescription & { role: "segment-store" | "registry" }> = [];
  if (config.segment) {
    const { store, backend } = config.segment;
    described.push({ role: "segment-store", ...storeBackend(store).describe(backend) });
  }
  if (config.snowflake) {
    const { registry } = config.snowflake;
    described.push({ role: "registry", ...registryBackend(registry.kind).describe(registry) });
  }
  return described;
}

/**
 * "snowflake.registry=zk with snowflake.zk.mode=recycle, mysql with snowflake.mysql.mode=lease,
 * postgres, redis or etcd": the registries that lease a requested worker id, for messages.
 */
export function leasingRegistries(): string {
  const choices = REGISTRIES.flatMap((r) => (r.leasingChoice ? [r.leasingChoice] : []));
  const last = choices.pop();
  return `snowflake.registry=${choices.length > 0 ? `${choices.join(", ")} or ${last}` : last}`;
}
