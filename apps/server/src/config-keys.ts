// Every configuration key of the server in one table: its canonical dotted name (JSON/YAML path),
// environment variable, Java Leaf / fork aliases, how its value is read and its default (the value
// the loader uses, and the README's text for it). The loader, the README's table and the tests all
// come from this list (the readers are in config-readers.ts).
import {
  accessTokens,
  adminToken,
  anyText,
  boolean,
  etcdUrl,
  host,
  integer,
  json,
  LOG_LEVELS,
  mysqlUrl,
  nonEmpty,
  oneOf,
  prefix,
  redisUrl,
  registry,
  serviceName,
  table,
  tagList,
  tagOrEmpty,
  timeZone,
  zkAddress,
} from "./config-readers";

export { Expected, hasControlCharacters } from "./config-readers";

/** One configuration key. */
export interface KeyDef<T = unknown> {
  /** Canonical name, the path in a JSON or YAML file: "server.port". */
  key: string;
  /** Environment variable: "LEAF_SERVER_PORT". */
  env: string;
  /**
   * Other names accepted in files and (as LEAF_... variables) in the environment: Java Leaf's keys.
   */
  aliases: readonly string[];
  /** Short description of the accepted values, for errors and the README. */
  type: string;
  /**
   * The value the loader uses when the key is not set. Absent when the default is worked out from
   * other keys, or left to the package the setting is passed to: `defaultText` then says what it
   * is.
   */
  default?: T;
  /** The default as the README's table states it; `default` written out unless given. */
  defaultText: string;
  /** What the key does. */
  doc: string;
  /** Hidden in messages and logs. */
  secret?: boolean;
  /** Reads a raw value (a string from .properties or the environment, or a JSON/YAML value). */
  read(raw: unknown): T;
}

/** "redisSequence.batchSize" -> "LEAF_REDIS_SEQUENCE_BATCH_SIZE". */
export function envName(key: string): string {
  return `LEAF_${key
    .replace(/([a-z0-9])([A-Z])/g, "$1_$2")
    .replace(/[.-]/g, "_")
    .toUpperCase()}`;
}

type KeyOptions<T> = Omit<KeyDef<T>, "key" | "env" | "aliases" | "default" | "defaultText"> & {
  aliases?: string[];
};

/** How the README writes a default value: as is, `""` for the empty string. */
export function showDefault(value: unknown): string {
  return value === "" ? '""' : String(value);
}

/** A key whose default is a value (`defaultText` only to say more than the value). */
function def<K extends string, T>(
  key: K,
  options: KeyOptions<T> & { default: NoInfer<T>; defaultText?: string },
): KeyDef<T> & { key: K; default: T };
/** A key whose default is worked out from other keys, or left to a package: text only. */
function def<K extends string, T>(
  key: K,
  options: KeyOptions<T> & { defaultText: string },
): KeyDef<T> & { key: K };
function def<K extends string, T>(
  key: K,
  options: KeyOptions<T> & { default?: T; defaultText?: string },
): KeyDef<T> & { key: K } {
  return {
    key,
    env: envName(key),
    ...options,
    aliases: options.aliases ?? [],
    defaultText: options.defaultText ?? showDefault(options.default),
  };
}

// ---- the keys ---------------------------------------------------------------------------------

/** Every configuration key, in the order of the README's table. */
export const CONFIG_KEYS = [
  def("name", {
    aliases: ["leaf.name"],
    type: "letters, digits, . _ -",
    default: "leaf",
    doc: "Service name: the registries keep one worker-id space per name; the redis sequence namespace defaults to it.",
    read: serviceName,
  }),
  def("dataDir", {
    type: "folder path",
    default: "./.leaf-data",
    doc: "Local data: the embedded segment store (`segments/`), the segment high-water marks (`segment-high-water/`) and the local registry's lock and cache files (`registry-local/`). Keep it on a volume.",
    read: nonEmpty("a folder path"),
  }),
  def("log.level", {
    type: LOG_LEVELS.join(" | "),
    default: "info",
    doc: "Log level (pino, JSON lines on stdout).",
    read: oneOf(LOG_LEVELS),
  }),
  def("server.host", {
    aliases: ["server.address"],
    type: "host or IP",
    defaultText: "0.0.0.0 when a shared store or registry is configured, else 127.0.0.1",
    doc: "Address to listen on; `0.0.0.0` for every interface. Off loopback, the embedded store needs `segment.store=embedded` and the local registry an explicit worker id.",
    read: host,
  }),
  def("server.port", {
    type: "0 to 65535",
    default: 8080,
    doc: "Port to listen on (Spring Boot's `server.port`, as Java Leaf). 0 picks a free port.",
    read: integer(0, 65535),
  }),
  def("server.maxBatch", {
    type: "1 to 100,000",
    default: 10_000,
    doc: "Largest `count` of a batch request. At most 100,000, so that one request's synchronous work stays far below the shortest lease margin (see Batches and leases).",
    read: integer(1, 100_000),
  }),
  def("server.adminToken", {
    type: "16+ characters",
    defaultText: "(none: admin API off)",
    doc: "Bearer token of the admin API (create tags, change steps, list tags). Without it the admin API is not served.",
    secret: true,
    read: adminToken,
  }),
  def("server.accessTokens", {
    type: 'JSON {"tag": "token" | ["token", ...]}',
    defaultText: "(none: id endpoints open)",
    doc: 'Per-tag access tokens on the id endpoints, as tinyid: a listed tag (segment tag or snowflake key) needs `?token=` or `Authorization: Bearer`; "*" covers every other tag and the redis sequence.',
    secret: true,
    read: accessTokens,
  }),
  def("server.requestLog", {
    type: "boolean",
    default: false,
    doc: "Log every request (costs throughput); errors are always logged.",
    read: boolean,
  }),
  def("server.drainMs", {
    type: "0 to 600,000",
    default: 5000,
    doc: "On SIGTERM, how long the server keeps answering (readiness false, every answer with `Connection: close`) before it closes its port, so that load balancers stop sending first. Ctrl-C (SIGINT) skips it.",
    read: integer(0, 600_000),
  }),
  def("server.shutdownTimeoutMs", {
    type: "1,000 to 600,000",
    default: 10_000,
    doc: "On SIGTERM, how long in-flight requests and the lease release may take before the process exits with code 1.",
    read: integer(1000, 600_000),
  }),
  def("server.monitor", {
    type: "boolean",
    default: true,
    doc: "Serve the monitor page (`/monitor`) and its data (`/api/v1/monitor`).",
    read: boolean,
  }),
  def("segment.enabled", {
    aliases: ["leaf.segment.enable"],
    type: "boolean",
    default: true,
    doc: "Serve segment mode.",
    read: boolean,
  }),
  def("segment.store", {
    type: "embedded | mysql",
    defaultText: "mysql when a URL is set, else embedded (loopback only)",
    doc: "Where segment ranges come from: Java Leaf's `leaf_alloc` table, or the embedded store in `dataDir/segments` (one single node). With a Java Leaf file or a non-loopback `server.host`, `embedded` must be set explicitly.",
    read: oneOf(["embedded", "mysql"] as const),
  }),
  def("segment.mysql.url", {
    aliases: ["leaf.jdbc.url"],
    type: "jdbc:mysql:// or mysql:// URL",
    defaultText: "(none)",
    doc: "Database of the `leaf_alloc` table. A JDBC URL is accepted (its parameters are ignored).",
    read: mysqlUrl,
  }),
  def("segment.mysql.username", {
    aliases: ["leaf.jdbc.username"],
    type: "string",
    defaultText: "the URL's user",
    doc: "Database user.",
    read: nonEmpty("a user name", 256),
  }),
  def("segment.mysql.password", {
    aliases: ["leaf.jdbc.password"],
    type: "string (may be empty)",
    defaultText: "the URL's password; required",
    doc: "Database password. Required when the store is mysql (an empty value means no password).",
    secret: true,
    read: anyText,
  }),
  def("segment.mysql.table", {
    type: "table name",
    defaultText: "leaf_alloc",
    doc: "Table of tags and max ids.",
    read: table,
  }),
  def("segment.mysql.createTable", {
    type: "boolean",
    default: false,
    doc: "Create the table at start when it is missing.",
    read: boolean,
  }),
  def("segment.demoTag", {
    type: 'tag, or ""',
    default: "leaf-segment-test",
    doc: "Embedded store only: a tag created at start when missing (Java Leaf's demo row: start 1, step 2000); once deleted through the admin API it is not created again (the start logs it).",
    read: tagOrEmpty,
  }),
  def("segment.refreshIntervalMs", {
    type: "1,000 to 86,400,000",
    default: 60_000,
    doc: "How often the tag list is re-read from the store.",
    read: integer(1000, 86_400_000),
  }),
  def("segment.exhaustedWaitMs", {
    type: "0 to 60,000",
    default: 1000,
    doc: "How long a request waits for the next range when both ranges are used up, before 503 (Leaf code -3).",
    read: integer(0, 60_000),
  }),
  def("segment.dynamicStep", {
    type: "boolean",
    default: true,
    doc: "Leaf's dynamic step (double under 15 minutes per range, halve over 30).",
    read: boolean,
  }),
  def("segment.prefetchMaxDepth", {
    type: "1 to 64",
    default: 8,
    doc: "Most ranges a tag keeps ready ahead: the depth grows while a burst outruns the loads and shrinks when idle; 1 is Java Leaf's double buffer. A crash loses up to this many ranges plus one.",
    read: integer(1, 64),
  }),
  def("segment.giveBackOnClose", {
    type: "boolean",
    default: true,
    doc: "On a graceful stop, give the ids this node holds and never handed out back to the store (only when no other node took a range since), so a restart skips none.",
    read: boolean,
  }),
  def("segment.load", {
    type: "eager | lazy | recent",
    default: "lazy" as "eager" | "lazy" | "recent",
    doc: "When a tag's first range is taken: `lazy` on its first request, as Java Leaf (that request waits one database round trip; a node takes no range of a tag it never serves); `eager` every tag at start (one range per tag per restart, used or not: lost at a crash); `recent` at start for tags whose row changed within `segment.recentMs` (any server took a range, also of tags this node never serves), lazily for the rest. Tags in `segment.eagerTags` are loaded at start under `lazy` and `recent` too: list the hot tags whose first request must not wait. Readiness never waits for any tag.",
    read: oneOf(["eager", "lazy", "recent"] as const),
  }),
  def("segment.eagerTags", {
    type: "tags, comma-separated (or a list)",
    default: [] as string[],
    defaultText: "(none)",
    doc: "Hot tags whose first range is taken at start whatever `segment.load` says.",
    read: tagList,
  }),
  def("segment.recentMs", {
    type: "0 to 2,592,000,000",
    default: 3_600_000,
    doc: "With `segment.load=recent`: a tag whose row changed within this many ms (1 hour) is loaded at start.",
    read: integer(0, 2_592_000_000),
  }),
  def("snowflake.enabled", {
    aliases: ["leaf.snowflake.enable"],
    type: "boolean",
    default: true,
    doc: "Serve snowflake mode.",
    read: boolean,
  }),
  def("snowflake.registry", {
    aliases: ["leaf.snowflake.mode"],
    type: "local | zk | mysql | redis | etcd | zk_normal | zk_recycle",
    defaultText:
      "the registry whose address is set (snowflake.zk.address, .redis.url, .etcd.url, .mysql.url), else local",
    doc: "Where the worker id comes from (the fork's `leaf.snowflake.mode`; `zk_recycle` is zk with `snowflake.zk.mode=recycle`). A registry's address is never ignored: two registries' addresses, or another registry's address beside this key, are refused.",
    read: registry,
  }),
  def("snowflake.ip", {
    type: "IP address",
    defaultText: "first non-loopback IPv4",
    doc: "This node's address in the registry (Java Leaf: the first non-loopback IPv4).",
    read: host,
  }),
  def("snowflake.port", {
    aliases: ["leaf.snowflake.port"],
    type: "1 to 65535",
    defaultText: "the listening port",
    doc: "This node's port in the registry: `ip:port` identifies the node.",
    read: integer(1, 65535),
  }),
  def("snowflake.layout", {
    type: "leaf | sonyflake | baidu | safe53ms | safe53s",
    default: "leaf",
    doc: "Bit layout of snowflake ids (leaf: 41 bits of ms, 10 worker, 12 sequence). safe53ms (41/4/8, ms) and safe53s (31/10/12, s) make ids of at most 53 bits, which JS numbers and JSON numbers hold exactly.",
    read: oneOf(["leaf", "sonyflake", "baidu", "safe53ms", "safe53s"] as const),
  }),
  def("snowflake.epoch", {
    type: "ms since 1970",
    defaultText: "the layout's (leaf: 1288834974657)",
    doc: "The layout's epoch; `/decodeSnowflakeId` decodes with it.",
    read: integer(0, 8_640_000_000_000),
  }),
  def("snowflake.timestampBits", {
    type: "1 to 63",
    defaultText: "the layout's",
    doc: "Overrides the layout's time bits.",
    read: integer(1, 63),
  }),
  def("snowflake.workerBits", {
    type: "0 to 62",
    defaultText: "the layout's",
    doc: "Overrides the layout's worker-id bits.",
    read: integer(0, 62),
  }),
  def("snowflake.sequenceBits", {
    type: "1 to 62",
    defaultText: "the layout's",
    doc: "Overrides the layout's sequence bits.",
    read: integer(1, 62),
  }),
  def("snowflake.unitMillis", {
    type: "1 to 86,400,000",
    defaultText: "the layout's",
    doc: "Overrides the layout's time unit in ms.",
    read: integer(1, 86_400_000),
  }),
  def("snowflake.clockToleranceMs", {
    type: "0 to 1,000",
    default: 5,
    doc: "A clock moved back by at most this is waited out; further, ids are refused (Leaf code -3).",
    read: integer(0, 1000),
  }),
  def("snowflake.backups", {
    type: "0 to 16",
    default: 0,
    doc: "Backup worker ids leased with the primary one, used when the clock moves back past the tolerance.",
    read: integer(0, 16),
  }),
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
  def("snowflake.statefulSet", {
    type: "boolean",
    default: false,
    doc: "Kubernetes: the worker id is this pod's StatefulSet ordinal (from HOSTNAME, `leaf-3` is 3) plus snowflake.statefulSetOffset. With snowflake.registry=redis, etcd, mysql in lease mode or zk in recycle mode the registry leases exactly that id or refuses the start while another pod holds it (safe). With the local registry only the pod's volume guards it: two pods with the same ordinal on different volumes (a force-delete) both issue the same ids; see registry-local's README. When a shared store or registry is configured (segment.mysql.url, redisSequence.url), that local mode is refused unless snowflake.registry=local is stated.",
    read: boolean,
  }),
  def("snowflake.statefulSetOffset", {
    type: "integer",
    default: 0,
    doc: "Kubernetes: added to the pod's ordinal, so that several StatefulSets share one worker-id space. Only with snowflake.statefulSet; an ordinal plus offset above the layout's largest worker id is refused at start.",
    read: integer(0, 4_194_303),
  }),
  def("snowflake.local.dir", {
    type: "folder path",
    defaultText: "dataDir/registry-local",
    doc: "Local registry: folder of its lock and cache files.",
    read: nonEmpty("a folder path"),
  }),
  def("snowflake.zk.address", {
    aliases: ["leaf.snowflake.zk.address"],
    type: "host:port[,host:port][/chroot]",
    defaultText: "(none)",
    doc: "ZooKeeper servers (Java Leaf's tree `/snowflake/{name}/forever`).",
    read: zkAddress,
  }),
  def("snowflake.zk.mode", {
    type: "normal | recycle",
    default: "normal",
    doc: "normal: Java Leaf's fixed worker id per ip:port; recycle: ids freed when their holder is gone.",
    read: oneOf(["normal", "recycle"] as const),
  }),
  def("snowflake.zk.sessionTimeoutMs", {
    type: "1,000 to 600,000",
    default: 6000,
    doc: "ZooKeeper session timeout.",
    read: integer(1000, 600_000),
  }),
  def("snowflake.zk.stopWithoutSession", {
    type: "boolean",
    default: false,
    doc: "ZooKeeper normal mode: stop issuing ids while the ZooKeeper session is not proven alive (no ids during an outage longer than 2/3 of the session timeout). false, as Java Leaf: ids keep flowing, and a second process with the same ip:port started while this one is cut off or paused past its session can repeat ids until this one reconnects (see registry-zk's README).",
    read: boolean,
  }),
  def("snowflake.mysql.url", {
    type: "jdbc:mysql:// or mysql:// URL",
    defaultText: "segment.mysql.url",
    doc: "MySQL registry: database of `leaf_workerid_alloc` (the fork's table).",
    read: mysqlUrl,
  }),
  def("snowflake.mysql.username", {
    type: "string",
    defaultText: "segment.mysql.username",
    doc: "MySQL registry: user.",
    read: nonEmpty("a user name", 256),
  }),
  def("snowflake.mysql.password", {
    type: "string (may be empty)",
    defaultText: "segment.mysql.password; required",
    doc: "MySQL registry: password (an empty value means no password).",
    secret: true,
    read: anyText,
  }),
  def("snowflake.mysql.mode", {
    type: "fixed | lease",
    default: "fixed",
    doc: "fixed: the fork's table, id fixed per ip:port; lease: ids leased and recycled.",
    read: oneOf(["fixed", "lease"] as const),
  }),
  def("snowflake.mysql.leaseMs", {
    type: "500 to 600,000",
    defaultText: "60000",
    doc: "MySQL registry, lease mode: how long a lease lasts without renewal. The holder fences itself at leaseMs - leaseMs / 5 after its last renewal.",
    read: integer(500, 600_000),
  }),
  def("snowflake.mysql.createTable", {
    type: "boolean",
    default: false,
    doc: "MySQL registry: create its table at start when missing.",
    read: boolean,
  }),
  def("snowflake.redis.url", {
    type: "redis:// URL",
    defaultText: "redisSequence.url",
    doc: "Redis registry: the Redis that leases worker ids (`rediss://` for TLS).",
    secret: true,
    read: redisUrl,
  }),
  def("snowflake.redis.keyPrefix", {
    type: "string without { }",
    defaultText: "leaf:registry:",
    doc: "Redis registry: prefix of its keys (`<prefix>{<name>}:leases`, `:stamps`, `:marker`).",
    read: nonEmpty("a key prefix", 200),
  }),
  def("snowflake.redis.leaseMs", {
    type: "500 to 600,000",
    defaultText: "30000",
    doc: "Redis registry: how long a lease lasts without renewal, by Redis's clock. The holder fences itself at leaseMs - leaseMs / 5 after the last renewal Redis confirmed; after Redis loses its data no id is granted for leaseMs.",
    read: integer(500, 600_000),
  }),
  def("snowflake.etcd.url", {
    type: "http://host:port[,...]",
    defaultText: "(none)",
    doc: "etcd registry: etcd's client URLs, comma-separated (`https://` is checked against the system's CA roots).",
    read: etcdUrl,
  }),
  def("snowflake.etcd.prefix", {
    type: "key prefix starting with /",
    defaultText: "/leaf/worker-ids",
    doc: "etcd registry: prefix of its keys (`<prefix>/<name>/holder/<id>`, `/id/<id>`).",
    read: nonEmpty("a key prefix", 200),
  }),
  def("snowflake.etcd.leaseTtlSeconds", {
    type: "1 to 3,600",
    defaultText: "10",
    doc: "etcd registry: TTL of the etcd lease a node holds its worker id under. The holder fences itself at min(1 s, TTL / 4) before it could expire, counted from the last renewal etcd confirmed.",
    read: integer(1, 3600),
  }),
  def("redisSequence.enabled", {
    type: "boolean",
    defaultText: "true when a URL is set",
    doc: "Serve redis sequence ids.",
    read: boolean,
  }),
  def("redisSequence.url", {
    type: "redis:// URL",
    defaultText: "(none)",
    doc: "Redis server.",
    secret: true,
    read: redisUrl,
  }),
  def("redisSequence.namespace", {
    type: "letters, digits, . _ : -",
    defaultText: "name",
    doc: "Ids are unique within a namespace; it is the Redis Cluster hash tag of every key.",
    read: nonEmpty("a namespace", 128),
  }),
  def("redisSequence.prefix", {
    type: "string",
    default: "",
    doc: "Default prefix of the string form (prefix + yyyyMMddHHmmss + sequence + shard).",
    read: prefix,
  }),
  def("redisSequence.timeZone", {
    type: "UTC, +08:00, Asia/Shanghai",
    default: "UTC",
    doc: "Time zone of the string form's date (zones with daylight saving time are refused).",
    read: timeZone,
  }),
  def("redisSequence.batchSize", {
    type: "integer",
    defaultText: "1000",
    doc: "Largest range of sequences taken from Redis in one round trip.",
    read: integer(1, 1 << 24),
  }),
] as const satisfies readonly KeyDef[];

type AnyKey = (typeof CONFIG_KEYS)[number];

/** Names of every key. */
export type ConfigKey = AnyKey["key"];

/** Keys whose default is a value, which the loader uses when the key is not set. */
export type DefaultedKey = Extract<AnyKey, { default: unknown }>["key"];

/** The type of a key's value, as its reader returns it. */
export type ValueOf<K extends ConfigKey> = ReturnType<Extract<AnyKey, { key: K }>["read"]>;

/** A key's definition by its canonical name, alias, or "leaf."-prefixed canonical name. */
export function findKey(name: string): KeyDef | undefined {
  return LOOKUP.get(name) ?? (name.startsWith("leaf.") ? LOOKUP.get(name.slice(5)) : undefined);
}

const LOOKUP = new Map<string, KeyDef>();
for (const k of CONFIG_KEYS as readonly KeyDef[]) {
  LOOKUP.set(k.key, k);
  for (const alias of k.aliases) LOOKUP.set(alias, k);
}
