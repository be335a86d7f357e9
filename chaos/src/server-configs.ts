// Server configurations as a JSON config file holds them (keys from apps/server's config-keys.ts):
// one builder per mode, merged into one file per process.
import { ZK_SESSION_TIMEOUT_MS } from "./services";

/** The snowflake registries the server can use. */
export type RegistryKind = "zk" | "zk-recycle" | "mysql" | "mysql-lease" | "local";

/** Every registry, in report order. */
export const REGISTRIES: readonly RegistryKind[] = [
  "zk",
  "zk-recycle",
  "mysql",
  "mysql-lease",
  "local",
];

type Config = Record<string, unknown>;

/** Segment mode on the MariaDB table at `url` (password empty: the kit's root has none). */
export function segmentOn(
  url: string,
  options: { dynamicStep?: boolean; exhaustedWaitMs?: number } = {},
): Config {
  return {
    segment: {
      enabled: true,
      store: "mysql",
      mysql: { url, password: "" },
      dynamicStep: options.dynamicStep ?? true,
      ...(options.exhaustedWaitMs !== undefined
        ? { exhaustedWaitMs: options.exhaustedWaitMs }
        : {}),
    },
  };
}

/** Segment mode off. */
export function segmentOff(): Config {
  return { segment: { enabled: false } };
}

/** Where a registry keeps worker ids. */
export interface RegistryPlace {
  /** ZooKeeper connect string, for zk and zk-recycle. */
  zookeeper?: string;
  /** MariaDB URL, for mysql and mysql-lease. */
  mysqlUrl?: string;
  /** The worker id, for local. */
  localWorkerId?: number;
}

/** Snowflake mode on `registry`; node identity 127.0.0.1 and the listening port. */
export function snowflakeOn(
  registry: RegistryKind,
  place: RegistryPlace,
  options: { backups?: number } = {},
): Config {
  const common = { enabled: true, ip: "127.0.0.1", backups: options.backups ?? 0 };
  switch (registry) {
    case "zk":
    case "zk-recycle":
      return {
        snowflake: {
          ...common,
          registry: "zk",
          zk: {
            address: need(place.zookeeper, "a ZooKeeper address"),
            mode: registry === "zk" ? "normal" : "recycle",
            sessionTimeoutMs: ZK_SESSION_TIMEOUT_MS,
          },
        },
      };
    case "mysql":
    case "mysql-lease":
      return {
        snowflake: {
          ...common,
          registry: "mysql",
          mysql: {
            url: need(place.mysqlUrl, "a MariaDB URL"),
            password: "",
            mode: registry === "mysql" ? "fixed" : "lease",
            createTable: true,
          },
        },
      };
    case "local":
      return {
        snowflake: {
          ...common,
          registry: "local",
          local: { workerId: need(place.localWorkerId, "a worker id") },
        },
      };
  }
}

/** Snowflake mode off. */
export function snowflakeOff(): Config {
  return { snowflake: { enabled: false } };
}

/** The redis sequence on `url` in `namespace`. */
export function redisOn(url: string, namespace: string): Config {
  return { redisSequence: { enabled: true, url, namespace } };
}

/** Merges mode configs and the service name into one file's content. */
export function serverConfig(name: string, ...parts: Config[]): Config {
  // Loopback only: a configuration with a database would otherwise listen on every interface.
  return Object.assign({ name, server: { host: "127.0.0.1" } }, ...parts);
}

function need<T>(value: T | undefined, what: string): T {
  if (value === undefined) throw new Error(`[leaf] [chaos] this registry needs ${what}`);
  return value;
}
