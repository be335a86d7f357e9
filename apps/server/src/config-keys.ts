// The server's configuration keys in one table: its own keys here, each backend's with its entry in
// backends/ (spliced in where the README's table lists them). The loader, the README's table and
// the tests all come from this list (the readers are in config-readers.ts, the key definition in
// config-def.ts).

import type { RegistryChoice } from "./backends/backend";
import { REGISTRIES, SEGMENT_STORES } from "./backends/index";
import { def, type KeyDef } from "./config-def";
import {
  accessTokens,
  adminToken,
  boolean,
  Expected,
  host,
  integer,
  LOG_LEVELS,
  nonEmpty,
  oneOf,
  prefix,
  redisUrl,
  serviceName,
  tagList,
  timeZone,
  workerCount,
} from "./config-readers";

export { envName, type KeyDef, showDefault } from "./config-def";
export { Expected, hasControlCharacters } from "./config-readers";

type StoreKey = (typeof SEGMENT_STORES)[number]["keys"][number];
type RegistryKey = (typeof REGISTRIES)[number]["keys"][number];

const STORE_KINDS: string[] = SEGMENT_STORES.map((store) => store.kind);

/** Every value snowflake.registry accepts: each registry's kind, and its variants. */
const REGISTRY_CHOICES: string[] = REGISTRIES.flatMap((r) => [r.kind, ...(r.variants ?? [])]);

/** Reads snowflake.registry: a registry's kind, or one of its variants (the fork's zk_recycle). */
function registryChoice(raw: unknown): RegistryChoice {
  const t = typeof raw === "string" ? raw.trim() : undefined;
  for (const registry of REGISTRIES) {
    if (t === registry.kind) return { registry: t };
    if (t !== undefined && registry.variants?.includes(t)) {
      return { registry: registry.kind, variant: t };
    }
  }
  const kinds = REGISTRIES.map((r) => r.kind);
  const variants = REGISTRY_CHOICES.filter((c) => !(kinds as string[]).includes(c));
  throw new Expected(
    `one of ${kinds.join(", ")}${variants.length > 0 ? ` (or the fork's ${variants.join(", ")})` : ""}`,
  );
}

/**
 * "snowflake.zk.address, .mysql.url, .postgres.url, .redis.url, .etcd.url": the registries'
 * address keys.
 */
function registryAddresses(): string {
  const keys = REGISTRIES.flatMap((r) => r.addressKeys);
  return keys.map((key, i) => (i === 0 ? key : key.slice(key.indexOf(".")))).join(", ");
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
  def("server.workers", {
    type: "1 to 64, or auto",
    default: 1,
    doc: "Worker processes serving the port (node:cluster), each with its own snowflake worker id and its own segment ranges; `auto` is the number of cores. 1 is one process, as before. `--workers N` sets it on the command line. See [Worker processes](#worker-processes).",
    read: workerCount,
  }),
  def("segment.enabled", {
    aliases: ["leaf.segment.enable"],
    type: "boolean",
    default: true,
    doc: "Serve segment mode.",
    read: boolean,
  }),
  def("segment.store", {
    type: STORE_KINDS.join(" | "),
    defaultText: `the store whose address is set (${SEGMENT_STORES.flatMap((s) => s.addressKeys).join(", ")}), else embedded (loopback only)`,
    doc: "Where segment ranges come from: Java Leaf's `leaf_alloc` table in MySQL, the same table in PostgreSQL, or the embedded store in `dataDir/segments` (one single node). With a Java Leaf file or a non-loopback `server.host`, `embedded` must be set explicitly. Another store's address beside it is refused (unless the registry reads it: its database defaults to the segment store's).",
    read: oneOf(STORE_KINDS),
  }),
  ...SEGMENT_STORES.flatMap((store): readonly StoreKey[] => store.keys),
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
    type: REGISTRY_CHOICES.join(" | "),
    defaultText: `the registry whose address is set (${registryAddresses()}), else local`,
    doc: "Where the worker id comes from (the fork's `leaf.snowflake.mode`; `zk_recycle` is zk with `snowflake.zk.mode=recycle`). A registry's address is never ignored: two registries' addresses, or another registry's address beside this key, are refused.",
    read: registryChoice,
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
  def("snowflake.statefulSet", {
    type: "boolean",
    default: false,
    doc: "Kubernetes: the worker id is this pod's StatefulSet ordinal (from HOSTNAME, `leaf-3` is 3) plus snowflake.statefulSetOffset; with server.workers N (a number, the same in every pod; `auto` is refused) worker process k holds `offset + ordinal x N + k - 1`, so each pod holds a block of N ids. With snowflake.registry=postgres, redis, etcd, mysql in lease mode or zk in recycle mode the registry leases exactly that id or refuses the start while another pod holds it (safe). With the local registry only the pod's volume guards it: two pods with the same ordinal on different volumes (a force-delete) both issue the same ids; see registry-local's README. When a shared store or registry is configured (segment.mysql.url, segment.postgres.url, redisSequence.url, ...), that local mode is refused unless snowflake.registry=local is stated.",
    read: boolean,
  }),
  def("snowflake.statefulSetOffset", {
    type: "integer",
    default: 0,
    doc: "Kubernetes: added to the pod's ordinal (to `ordinal x server.workers`), so that several StatefulSets share one worker-id space: space the sets' offsets at least replicas x server.workers apart. Only with snowflake.statefulSet; a worker id above the layout's largest is refused at start.",
    read: integer(0, 4_194_303),
  }),
  ...REGISTRIES.flatMap((registry): readonly RegistryKey[] => registry.keys),
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
