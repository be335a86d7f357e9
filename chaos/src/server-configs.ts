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

/**
 * Segment mode on the embedded store (`dataDir/segments`), with `tag` created at start (the demo
 * tag: start 1, step 2000); fixed step, so ranges are journaled at a steady pace.
 */
export function segmentEmbedded(tag: string): Config {
  return { segment: { enabled: true, store: "embedded", demoTag: tag, dynamicStep: false } };
}

/** The admin token the harness gives servers that need their admin API (tag listing). */
export const ADMIN_TOKEN = "chaos-admin-token-0123456789";

/** The admin API on, with {@link ADMIN_TOKEN}. */
export function adminOn(): Config {
  return { server: { adminToken: ADMIN_TOKEN } };
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

/** Snowflake options beside the registry. */
export interface SnowflakeOptions {
  backups?: number;
  /** Worker-id bits of the Leaf layout (0: one worker id, for servers that must compete for it). */
  workerBits?: number;
  /** ZooKeeper session timeout (default {@link ZK_SESSION_TIMEOUT_MS}). */
  sessionTimeoutMs?: number;
  /** The mysql lease registry's lease (default: the server's, 60 s). */
  leaseMs?: number;
  /**
   * ZooKeeper normal mode's strict mode (`snowflake.zk.stopWithoutSession`, default the server's,
   * false): no id while the session is not proven alive.
   */
  stopWithoutSession?: boolean;
}

/** Snowflake mode on `registry`; node identity 127.0.0.1 and the listening port. */
export function snowflakeOn(
  registry: RegistryKind,
  place: RegistryPlace,
  options: SnowflakeOptions = {},
): Config {
  const common = {
    enabled: true,
    ip: "127.0.0.1",
    backups: options.backups ?? 0,
    ...(options.workerBits !== undefined ? { workerBits: options.workerBits } : {}),
  };
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
            sessionTimeoutMs: options.sessionTimeoutMs ?? ZK_SESSION_TIMEOUT_MS,
            ...(options.stopWithoutSession !== undefined
              ? { stopWithoutSession: options.stopWithoutSession }
              : {}),
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
            ...(options.leaseMs !== undefined ? { leaseMs: options.leaseMs } : {}),
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
  const config: Config = Object.assign({ name }, ...parts);
  config.server = { ...(config.server as Config | undefined), host: "127.0.0.1" };
  return config;
}

function need<T>(value: T | undefined, what: string): T {
  if (value === undefined) throw new Error(`[leaf] [chaos] this registry needs ${what}`);
  return value;
}
