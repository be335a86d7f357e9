// The families the nemesis attacks, one at a time: the servers, stores and clients of each, and the
// error codes the README documents for a server of that mode whose store, lease or clock is in
// trouble (what the checker accepts while a fault that causes it is active).
import {
  adminOn,
  type RegistryKind,
  segmentEmbedded,
  segmentOff,
  segmentOn,
  serverConfig,
  snowflakeOff,
  snowflakeOn,
} from "../server-configs";
import type { Cluster, ServerSpec, StoreKind } from "./cluster";
import { postgresRegistryOf, segmentPostgresFamily } from "./family-postgres";
import { segmentRedisFamily } from "./family-redis-segment";
import { segmentResidueFamily } from "./family-residue";
import { workersFamily } from "./family-workers";
import { WORKERS } from "./faults/worker-pids";
import type { Mode } from "./history";

/** One client of the load. */
export interface ClientSpec {
  name: string;
  /** Java Leaf's plain-text paths, the JSON API, or a @leaf/client over several servers. */
  kind: "java" | "json" | "pool";
  mode: Mode;
  /** The server it asks (java, json) or the servers of its pool. */
  servers: string[];
  /** Segment tag. */
  tag?: string;
  /** Redis sequence shard. */
  shard?: number;
  space: string;
  /** Whether ids from one server process must increase for this client (README promise). */
  increasing: boolean;
  /**
   * With `increasing`: ids increase only within each residue class `id % residueClasses` (a
   * residue set's databases each hand out one class; across them ids are not ordered).
   */
  residueClasses?: number;
}

/** A family: one mode (and registry) with its cluster and load. */
export interface Family {
  name: string;
  title: string;
  stores: StoreKind[];
  tags: Array<{ tag: string; step: number }>;
  servers: ServerSpec[];
  clients: ClientSpec[];
  /** Codes a server may answer while its store or lease is in doubt. */
  storeCodes: string[];
  /** Codes a server may answer while its wall clock is stepped. */
  clockCodes: string[];
  /**
   * ms a server may need after its store returns before it serves again (lease, session,
   * quarantine).
   */
  recoveryMs: number;
  /**
   * How long an HTTP client waits for one answer (default 2 s): longer where the README lets a
   * call wait longer (the redis sequence waits up to `maxWaitMs` for the second after a fence).
   */
  requestTimeoutMs?: number;
  /** The store that leases worker ids (the link a clock step plus cut targets). */
  leaseStore?: StoreKind;
  /** Segment tag served by the MariaDB servers (row locks and admin operations use it). */
  mysqlTag?: string;
  /** ZooKeeper as a 3-server ensemble (server i on member i mod 3), for follower partitions. */
  zkEnsemble?: boolean;
  /**
   * ZooKeeper normal mode in strict mode (`snowflake.zk.stopWithoutSession`): a holder issues
   * nothing once its session is not proven alive, so a second process as its `ip:port` may take
   * its marker while it is cut off (`session-lost-identity` is drawn only here).
   */
  zkStrict?: boolean;
  /** MariaDB as a primary with an asynchronous replica, for promotions (`cluster.replicaPair`). */
  mysqlReplica?: boolean;
  /** Segment tag served by the PostgreSQL servers (`postgres-promoted` checks and fixes it). */
  postgresTag?: string;
  /** PostgreSQL as a primary with a streaming replica, for promotions (`cluster.postgresPair`). */
  postgresReplica?: boolean;
  /** Redis as a master with a replica, for promotions (`cluster.redisSet`). */
  redisReplica?: boolean;
  /** The Redis segment store's namespace, created with `tags` before the servers start. */
  redisSegment?: string;
  /** The Redis segment store's `waitReplicas` (default 0): replicas every write waits for. */
  redisWaitReplicas?: number;
  /**
   * The databases of a residue set (`segment.store=residue`), in member order: each server reaches
   * each through its own proxy, and one of them down costs no request while another answers.
   */
  residue?: StoreKind[];
  /** Its own faults restart the family's store (with an operator's recovery): not `store-kill`. */
  ownStoreRestart?: boolean;
  /** The servers a restart may be refused on while a worker id is still leased: retries. */
  restartAttempts: number;
  /** Worker processes per server (server.workers); absent: one process. */
  workers?: number;
  /**
   * A server whose wall clock runs ahead of its lease store's by more than about a lease stalls
   * (LEASE_LOST) until its clock is set back (the Redis registry stores no horizon past Redis TIME
   * + lease): a forward step that leaves it further ahead than that is undone when it ends, as
   * that registry's README tells an operator to (faults/clock-forward.ts). Elsewhere a step forward
   * is left there (renewals store the stepped clock).
   */
  clockSetBack?: boolean;
  /**
   * The registry refuses a start, and a lost lease's re-acquire, on a server whose clock is more
   * than this many ms off its live peers' (registry-zk's peer clock check, `maxSkewMs`): while a
   * clock step leaves two servers that far apart, a server whose clock was not stepped may be
   * refused too (faults/fault.ts, `peerSkewEffects`).
   */
  peerClockSkewMs?: number;
}

/** The name every server serves under (the registries' worker-id space). */
export const NAME = "nem";

/** Java and JSON clients on one server. */
export function httpClients(
  label: string,
  mode: Mode,
  space: string,
  increasing: boolean,
  extra: { tag?: string; shard?: number } = {},
): ClientSpec[] {
  return (["java", "json"] as const).map((kind) => ({
    name: `${label} ${kind} ${mode}`,
    kind: mode === "redisSequence" ? "json" : kind,
    mode,
    servers: [label],
    space,
    increasing,
    ...extra,
  }));
}

/**
 * The two `@leaf/client` pools of a segment family, each over every server of `servers`: their ids
 * come from several servers, so they increase nowhere.
 */
export function segmentPoolClients(servers: string[], tag: string, space: string): ClientSpec[] {
  return [1, 2].map((n) => ({
    name: `client-${n} segment`,
    kind: "pool" as const,
    mode: "segment" as const,
    servers,
    tag,
    space,
    increasing: false,
  }));
}

/**
 * Segment mode on the family's MariaDB through `label`'s proxy: fixed step, and the tag list
 * re-read every 2 s (default 60 s), so that a tag refused for a row moved back is served again soon
 * after the row is fixed.
 */
export function segmentOnMysql(c: Cluster, label: string) {
  const config = segmentOn(c.urlOf(label, "mysql"), { dynamicStep: false }) as {
    segment: Record<string, unknown>;
  };
  return { segment: { ...config.segment, refreshIntervalMs: 2000 } };
}

/** The segment family's servers with defaults (never meant to start). */
const DEFAULTS = ["E", "F"];
/** The segment family's servers of the give-back chain (no clients, eager load). */
const CHAIN = ["G", "H"];

function segmentFamily(): Family {
  const tag = "nem";
  const mysqlServers = ["A", "B", "C"];
  const servers: ServerSpec[] = mysqlServers.map((label) => ({
    label,
    links: ["mysql"],
    config: (c: Cluster) => serverConfig(NAME, segmentOnMysql(c, label), snowflakeOff(), adminOn()),
  }));
  servers.push({
    label: "D",
    links: [],
    config: () => serverConfig(NAME, segmentEmbedded("nem-embedded"), snowflakeOff()),
  });
  // Two servers with snowflake on and no registry named, segment on the shared table: both must be
  // refused at start (issue 24, item 5). Were they not, both would take the default worker id 0.
  for (const label of DEFAULTS) {
    servers.push({
      label,
      links: ["mysql"],
      spare: "defaults",
      config: (c: Cluster) =>
        serverConfig(NAME, segmentOnMysql(c, label), { snowflake: { enabled: true } }),
    });
  }
  // Two servers with no clients that take a range of every tag at start: the give-back-chain
  // fault starts and stops them in turn.
  for (const label of CHAIN) {
    servers.push({
      label,
      links: ["mysql"],
      spare: "give-back-chain",
      config: (c: Cluster) => {
        const config = segmentOnMysql(c, label);
        return serverConfig(
          NAME,
          { segment: { ...config.segment, load: "eager" } },
          snowflakeOff(),
        );
      },
    });
  }
  const space = `segment:${tag}`;
  return {
    name: "segment",
    title: "segment: A, B, C on one MariaDB table (tag nem, step 500), D on the embedded store",
    stores: ["mysql"],
    tags: [{ tag, step: 500 }],
    servers,
    clients: [
      ...mysqlServers.flatMap((label) => httpClients(label, "segment", space, true, { tag })),
      ...httpClients("D", "segment", "segment:D-embedded", true, { tag: "nem-embedded" }),
      // Asking only while E or F runs, which they must not.
      ...DEFAULTS.flatMap((label) => httpClients(label, "snowflake", "snowflake:defaults", true)),
      ...segmentPoolClients(mysqlServers, tag, space),
    ],
    storeCodes: ["SEGMENTS_EXHAUSTED", "NOT_INITIALIZED"],
    clockCodes: [],
    recoveryMs: 5000,
    mysqlTag: tag,
    restartAttempts: 2,
  };
}

/** The snowflake registries the nemesis runs, each a family. */
export const SNOWFLAKE_REGISTRIES = [
  "zk",
  "zk-recycle",
  "mysql",
  "mysql-lease",
  "redis",
  "etcd",
  "local",
  "statefulset",
  "statefulset-workers",
  "postgres",
] as const;
type SnowflakeRegistry = (typeof SNOWFLAKE_REGISTRIES)[number];

/** Lease length of the leased registries (short, so that faults outlast leases). */
const LEASE_MS = 3000;

/** Registries that lease worker ids (a holder cut off must fence before its lease ends). */
const LEASED: readonly SnowflakeRegistry[] = [
  "zk-recycle",
  "mysql-lease",
  "redis",
  "etcd",
  "statefulset",
  "statefulset-workers",
  "postgres",
];

/** Options of a snowflake family beside its registry. */
interface SnowflakeFamilyOptions {
  /** ZooKeeper normal mode: `snowflake.zk.stopWithoutSession` (default the server's, false). */
  stopWithoutSession?: boolean;
}

function snowflakeConfig(
  c: Cluster,
  label: string,
  registry: SnowflakeRegistry,
  index: number,
  options: SnowflakeFamilyOptions = {},
) {
  const leased = LEASED.includes(registry);
  const workerBits = leased ? { workerBits: 2 } : {};
  const common = { enabled: true, ip: "127.0.0.1", backups: 0, ...workerBits };
  switch (registry) {
    case "redis":
      return {
        snowflake: {
          ...common,
          registry: "redis",
          redis: { url: c.urlOf(label, "redis"), leaseMs: LEASE_MS },
        },
      };
    case "etcd":
      return {
        snowflake: {
          ...common,
          registry: "etcd",
          etcd: { url: c.urlOf(label, "etcd"), leaseTtlSeconds: LEASE_MS / 1000 },
        },
      };
    case "postgres":
      return { snowflake: { ...common, ...postgresRegistryOf(c, label, LEASE_MS) } };
    case "statefulset":
    case "statefulset-workers":
      // The safe way to run ordinals: the pod's ordinal is the id the Redis registry leases, or
      // refuses while another pod holds it (the local registry guards an ordinal by its volume
      // only). A pod of two worker processes leases the block ordinal x 2, ordinal x 2 + 1.
      return {
        snowflake: {
          ...common,
          registry: "redis",
          statefulSet: true,
          redis: { url: c.urlOf(label, "redis"), leaseMs: LEASE_MS },
        },
      };
    default: {
      const kind = registry as RegistryKind;
      return snowflakeOn(
        kind,
        {
          zookeeper: kind.startsWith("zk") ? c.urlOf(label, "zookeeper") : undefined,
          mysqlUrl: kind.startsWith("mysql") ? c.urlOf(label, "mysql") : undefined,
          localWorkerId: index,
        },
        {
          ...workerBits,
          sessionTimeoutMs: 4000,
          leaseMs: kind === "mysql-lease" ? LEASE_MS : undefined,
          stopWithoutSession: kind === "zk" ? options.stopWithoutSession : undefined,
        },
      );
    }
  }
}

function snowflakeFamily(
  registry: SnowflakeRegistry,
  options: SnowflakeFamilyOptions = {},
): Family {
  const store: StoreKind | undefined = registry.startsWith("zk")
    ? "zookeeper"
    : registry.startsWith("mysql")
      ? "mysql"
      : registry === "etcd"
        ? "etcd"
        : registry === "redis" || registry.startsWith("statefulset")
          ? "redis"
          : registry === "postgres"
            ? "postgres"
            : undefined;
  const leased = LEASED.includes(registry);
  const pods = registry.startsWith("statefulset");
  // Pods of two worker processes: two pods fill the 2 worker-id bits (ids 0-3), as three pods of
  // one process fill 0-2 and leave 3 to the standby elsewhere.
  const workers = registry === "statefulset-workers" ? WORKERS : undefined;
  const perServer = workers ? { server: { workers } } : {};
  const labels = workers ? ["A", "B"] : ["A", "B", "C"];
  const servers: ServerSpec[] = labels.map((label, index) => ({
    label,
    links: store ? [store] : [],
    env: pods ? { HOSTNAME: `leaf-${index}` } : undefined,
    config: (c: Cluster) =>
      serverConfig(
        NAME,
        segmentOff(),
        snowflakeConfig(c, label, registry, index, options),
        perServer,
      ),
  }));
  if (leased) {
    // A spare that asks for exactly the worker id a holder leases (snowflake.statefulSet, its
    // HOSTNAME set by the fault to that id's pod name): refused while the holder's lease lives,
    // granted when it lapses (a takeover). On the statefulset family it is a second pod with a
    // running pod's ordinal (a force-deleted pod still running); elsewhere a standby.
    const label = "S";
    servers.push({
      label,
      links: store ? [store] : [],
      spare: pods ? "second-pod" : "standby",
      config: (c: Cluster) => {
        const config = snowflakeConfig(c, label, registry, 3) as {
          snowflake: Record<string, unknown>;
        };
        return serverConfig(
          NAME,
          segmentOff(),
          { snowflake: { ...config.snowflake, statefulSet: true } },
          perServer,
        );
      },
    });
  }
  if (registry === "zk") {
    // A second process as a running server's ip:port (registry-zk README, "When the session is
    // lost"): `same-identity` sets its snowflake.port to the holder's (LEAF_SNOWFLAKE_PORT) before
    // each start, so it asks for the holder's node and shares its cache file. Its own port
    // (configured here) is only its HTTP port.
    const label = "S";
    servers.push({
      label,
      links: ["zookeeper"],
      spare: "same-identity",
      config: (c: Cluster) =>
        serverConfig(
          NAME,
          segmentOff(),
          snowflakeConfig(c, label, registry, 3, options),
          perServer,
        ),
    });
  }
  const space = "snowflake:nem";
  const spares = servers.filter((s) => s.spare).map((s) => s.label);
  return {
    name: `snowflake-${registry}`,
    title: workers
      ? "snowflake on the Redis registry from StatefulSet pods of two worker processes: A, B as pods leaf-0, leaf-1 leasing worker ids 0-1 and 2-3 (2 worker-id bits, 3 s leases), S a second pod of two workers with a held ordinal"
      : `snowflake on the ${registry} registry: A, B, C${leased ? " (2 worker-id bits, 3 s leases)" : ""}${pods ? " as pods leaf-0..2 leasing their ordinals from Redis, S a second pod with a held ordinal" : leased ? ", S a standby asking for a held worker id" : registry === "zk" ? ", S a second process given a running server's ip:port" : ""}`,
    stores: store ? [store] : [],
    tags: [],
    servers,
    clients: [
      // A server of two worker processes answers from both: its ids increase per worker only.
      ...[...labels, ...spares].flatMap((label) =>
        httpClients(label, "snowflake", space, !workers),
      ),
      {
        name: "client-1 snowflake",
        kind: "pool",
        mode: "snowflake",
        servers: labels,
        space,
        increasing: false,
      },
    ],
    // Every registry now bounds ids by a horizon (a lease's, a fixed id's last stored report + the
    // restart wait, a local lock's heartbeat): a clock stepped forward past it answers LEASE_LOST
    // until a renewal or report stores the stepped clock (core and registry READMEs). So does a
    // server paused or starved past it, with or without its store: on SIGCONT the event loop may
    // answer a request it read before its report timer runs (the long run of 28 Nov, seed 2811:
    // one LEASE_LOST on snowflake-zk, A paused 1.4 s while ZooKeeper was down, 147 ms past its
    // horizon; before that, the fixed-id families listed only NOT_INITIALIZED here).
    storeCodes: ["LEASE_LOST", "NOT_INITIALIZED"],
    clockCodes: ["CLOCK_MOVED_BACKWARDS", "CLOCK_BEHIND", "LEASE_LOST"],
    recoveryMs: leased ? 4 * LEASE_MS + 4000 : 4000,
    leaseStore: leased ? store : undefined,
    // The postgres registry on a pair whose replica `postgres-promoted` promotes.
    postgresReplica: registry === "postgres" || undefined,
    restartAttempts: leased ? 6 : 2,
    workers,
    clockSetBack: store === "redis" || undefined,
    // registry-zk's default peerClockCheck.maxSkewMs (its README, "Start-up checks").
    peerClockSkewMs: store === "zookeeper" ? 5000 : undefined,
  };
}

function redisSequenceFamily(): Family {
  const labels = ["A", "B"];
  return {
    name: "redis-sequence",
    title: "redis sequence: A and B on one Redis (no persistence), namespace nem",
    stores: ["redis"],
    tags: [],
    servers: labels.map((label) => ({
      label,
      links: ["redis"],
      config: (c: Cluster) =>
        serverConfig(NAME, segmentOff(), snowflakeOff(), {
          redisSequence: { enabled: true, url: c.urlOf(label, "redis"), namespace: NAME },
        }),
    })),
    clients: labels.flatMap((label, i) =>
      httpClients(label, "redisSequence", "redisSequence:nem", false, { shard: i }).map((c, k) => ({
        ...c,
        name: `${c.name} ${k === 0 ? "id" : "ids"}`,
      })),
    ),
    storeCodes: ["UNAVAILABLE"],
    clockCodes: ["CLOCK_SKEW", "UNAVAILABLE"],
    recoveryMs: 5000,
    // A call may wait up to maxWaitMs (5 s, the default) for the second after a fence (a Redis
    // restarted empty is fenced up to the highest second granted), then take a range (at most
    // refillTimeoutMs, 1 s): a client that gives up sooner records an answer still on its way.
    requestTimeoutMs: 7000,
    restartAttempts: 2,
  };
}

/** zk-recycle on a 3-server ensemble, each server on one member: a follower can be partitioned. */
function zkEnsembleFamily(): Family {
  const family = snowflakeFamily("zk-recycle");
  return {
    ...family,
    name: "snowflake-zk-ensemble",
    title: `${family.title}; ZooKeeper a 3-server ensemble, A, B, C, S each on member 1, 2, 3, 1`,
    zkEnsemble: true,
  };
}

/**
 * Set to "false" for the demonstration of strict mode taken out (chaos README, "Fixes taken out"):
 * `snowflake-zk-strict` then runs its servers with `stopWithoutSession` false, the default mode,
 * and keeps drawing `session-lost-identity`. Read only here.
 */
const STRICT_ENV = "NEMESIS_STOP_WITHOUT_SESSION";

/**
 * `snowflake-zk` with `snowflake.zk.stopWithoutSession` on every server (A, B, C and the spare S):
 * a holder whose session is not proven alive issues nothing (registry-zk README, "When the session
 * is lost"), so it answers LEASE_LOST (the generator past the session's `fenceAt`, 2/3 of the 4 s
 * session after the last write the leader answered; its lease lost once it finds its marker taken)
 * and NOT_INITIALIZED, as the recycle family. It recovers once it reattaches (0.1-2 s apart) or,
 * after a lost marker, acquires again (0.2-5 s apart), waiting out the other holder's session.
 */
function zkStrictFamily(): Family {
  const off = process.env[STRICT_ENV] === "false";
  const family = snowflakeFamily("zk", { stopWithoutSession: !off });
  return {
    ...family,
    name: "snowflake-zk-strict",
    title: `${family.title}; strict mode (stopWithoutSession)${off ? ` TAKEN OUT by ${STRICT_ENV}=false: the servers run the default` : ""}`,
    storeCodes: ["LEASE_LOST", "NOT_INITIALIZED"],
    recoveryMs: 10_000,
    zkStrict: true,
  };
}

/** The segment family on a MariaDB primary with an asynchronous replica the nemesis can promote. */
function segmentReplicaFamily(): Family {
  const family = segmentFamily();
  return {
    ...family,
    name: "segment-replica",
    title: `${family.title}; MariaDB a primary with an asynchronous replica (promoted by replica-promoted)`,
    // Not the give-back chain's spares: started after a promotion, a server that took no range
    // while the replica was stale takes ranges the others already handed out (the documented
    // hazard of a stale promotion, which replica-promoted avoids by promoting only when every
    // running server took a range past the replica's max_id).
    servers: family.servers.filter((s) => s.spare !== "give-back-chain"),
    mysqlReplica: true,
  };
}

/** Every family, in run order. */
export const FAMILIES: readonly Family[] = [
  segmentFamily(),
  ...SNOWFLAKE_REGISTRIES.map((registry) => snowflakeFamily(registry)),
  zkEnsembleFamily(),
  zkStrictFamily(),
  redisSequenceFamily(),
  segmentReplicaFamily(),
  segmentPostgresFamily(),
  segmentRedisFamily(),
  segmentRedisFamily(1),
  segmentResidueFamily(),
  workersFamily(),
];

/** The families named in `only` (all when empty); an unknown name is an error listing them. */
export function selectFamilies(only: string[] | undefined): Family[] {
  if (!only || only.length === 0) return [...FAMILIES];
  const unknown = only.filter((name) => !FAMILIES.some((f) => f.name === name));
  if (unknown.length > 0) {
    throw new Error(
      `[leaf] [nemesis] unknown family ${unknown.join(", ")}; the families are: ${FAMILIES.map((f) => f.name).join(", ")}`,
    );
  }
  return FAMILIES.filter((f) => only.includes(f.name));
}
