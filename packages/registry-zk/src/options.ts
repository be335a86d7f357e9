// Options of the ZooKeeper registry, their defaults, and the checks that turn a bad value into an
// INVALID_CONFIG error naming the key, before any connection is made.
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type Clock, configError, type NodeIdentity, systemClock } from "@leaf/core";
import { checkBackend } from "@leaf/core/adapter";
import { type AclSpec, type DigestAuth, resolveAcls, type ZkAcl } from "./acl";

export type { DigestAuth } from "./acl";

export const COMPONENT = "registry-zk";

/** How worker ids are handed out. */
export type ZookeeperRegistryMode = "normal" | "recycle";

/** The start-up check of this node's clock against the clocks of the other live nodes. */
export interface PeerClockCheckOptions {
  /**
   * Largest accepted difference, in ms, between this clock and a live peer's (default 5,000): a
   * node further than this from more than half of the live peers is refused.
   */
  maxSkewMs?: number;
  /**
   * A peer counts only when it holds a live ZooKeeper session and reported within this many ms,
   * by ZooKeeper's clock (default 10,000: three missed 3 s reports).
   */
  liveWindowMs?: number;
}

/** Options of {@link ZookeeperRegistry}. */
export interface ZookeeperRegistryOptions {
  /**
   * ZooKeeper servers, `host[:port][,host[:port]...][/chroot]` (port 2181 when absent). A chroot
   * that does not exist yet is created. (No `client` option: the registry opens its own session,
   * because it must see that session's loss to fence.)
   */
  url: string;
  /**
   * "normal" (default): Java Leaf's fixed worker id per ip:port under `/snowflake/{name}/forever`.
   * "recycle": ids held by ephemeral leases and reused once their holder is gone.
   */
  mode?: ZookeeperRegistryMode;
  /** Session timeout asked of the server, in ms (default 6,000, as Java Leaf's Curator client). */
  sessionTimeoutMs?: number;
  /** How long acquire waits for a connection before giving up (default 10,000 ms). */
  connectTimeoutMs?: number;
  /** Time limit of one ZooKeeper request (default: the negotiated session timeout). */
  operationTimeoutMs?: number;
  /**
   * A session that heard nothing from the server for this long is treated as lost (leases fenced
   * in recycle mode) before the server can expire it. Default: two thirds of the negotiated session
   * timeout. Must be below the session timeout.
   */
  silenceLimitMs?: number;
  /** Digest credentials added to every session. */
  auth?: DigestAuth;
  /**
   * ACL of every node the registry creates: "open" (world:anyone, all), "creator" (all rights for
   * the authenticated identity, needs `auth`), "creator-read" (creator all, world read), or a list.
   * Default: "creator-read" with `auth`, else "open".
   */
  acl?: AclSpec;
  /** Clock for timestamps and start-up checks (default: the system clock). */
  clock?: Clock;
  /**
   * How far the clock may be behind the stored timestamp (ZooKeeper's or the cache's) and still be
   * accepted, in ms (default 5, as the generator's rollback tolerance). Further behind:
   * CLOCK_BEHIND_LEASE.
   */
  clockToleranceMs?: number;
  /** The peer clock check (Meituan's blog): options, or false to switch it off. Default on. */
  peerClockCheck?: PeerClockCheckOptions | false;
  /**
   * Normal mode: the local cache file of the worker id and last timestamp, used when ZooKeeper is
   * unreachable at start. A path, a function of the node, or false for none. Default
   * `{os.tmpdir()}/{name}/registry-zk/{port}/workerID.json`: beside Java Leaf's `leafconf` folder,
   * never in it (Java Leaf writes its own file only when it creates that folder itself).
   */
  cacheFile?: string | ((node: NodeIdentity) => string) | false;
  /**
   * Normal mode: how long acquire waits for the live marker of the same ip:port to disappear (a
   * previous process of this node whose session has not expired yet) before WORKER_ID_IN_USE.
   * Default: the session timeout the marker's holder negotiated.
   */
  inUseWaitMs?: number;
  /**
   * Normal mode: whether a lease stops issuing ids while its ZooKeeper session is not proven alive
   * (`fenceAt` from the session, as recycle mode). Default false, as Java Leaf: ids keep flowing
   * while ZooKeeper is unreachable or the session is being replaced. See the README ("When the
   * session is lost") for what each setting guarantees and costs.
   */
  stopWithoutSession?: boolean;
  /**
   * Normal mode: Java Leaf's own cache file (`workerID=N`), read when ZooKeeper is unreachable at
   * start and `cacheFile` does not exist yet (a node migrating from Java Leaf). A path, a function
   * of the node, or false for none. Default
   * `{os.tmpdir()}/{name}/leafconf/{port}/workerID.properties` (Java Leaf's
   * `{java.io.tmpdir}/{leaf.name}/leafconf/{port}/workerID.properties`). Not read with
   * `cacheFile: false`.
   */
  javaCacheFile?: string | ((node: NodeIdentity) => string) | false;
}

/** Options with defaults applied and checked. */
export interface ResolvedOptions {
  url: string;
  servers: string;
  chroot: string;
  mode: ZookeeperRegistryMode;
  sessionTimeoutMs: number;
  connectTimeoutMs: number;
  operationTimeoutMs: number | undefined;
  silenceLimitMs: number | undefined;
  auth: DigestAuth | undefined;
  acls: ZkAcl[];
  clock: Clock;
  clockToleranceMs: number;
  peerClockCheck: Required<PeerClockCheckOptions> | false;
  cacheFile: ((node: NodeIdentity) => string) | undefined;
  inUseWaitMs: number | undefined;
  stopWithoutSession: boolean;
  javaCacheFile: ((node: NodeIdentity) => string) | undefined;
}

/** Validates `options` and applies the defaults. Throws INVALID_CONFIG naming the key. */
export function resolveOptions(options: ZookeeperRegistryOptions): ResolvedOptions {
  if (!options || typeof options !== "object") {
    throw configError(COMPONENT, "options", options, "an object with at least url");
  }
  checkBackend(options, {
    component: COMPONENT,
    url: CONNECTION_STRING,
    isUrl: (value): value is string => typeof value === "string",
    noClient: "the registry opens its own session, whose loss it must see to fence",
  });
  const { servers, chroot } = parseConnectionString(options.url);
  const mode = options.mode ?? "normal";
  if (mode !== "normal" && mode !== "recycle") {
    throw configError(COMPONENT, "mode", mode, '"normal" or "recycle"');
  }
  const sessionTimeoutMs = positiveInt("sessionTimeoutMs", options.sessionTimeoutMs, 6_000);
  const connectTimeoutMs = positiveInt("connectTimeoutMs", options.connectTimeoutMs, 10_000);
  const operationTimeoutMs =
    options.operationTimeoutMs === undefined
      ? undefined
      : positiveInt("operationTimeoutMs", options.operationTimeoutMs, 0);
  const silenceLimitMs =
    options.silenceLimitMs === undefined
      ? undefined
      : positiveInt("silenceLimitMs", options.silenceLimitMs, 0);
  const auth = options.auth;
  if (auth !== undefined) {
    if (
      typeof auth !== "object" ||
      typeof auth.username !== "string" ||
      auth.username === "" ||
      auth.username.includes(":") ||
      typeof auth.password !== "string"
    ) {
      throw configError(
        COMPONENT,
        "auth",
        auth && typeof auth === "object" ? { username: auth.username } : auth,
        "{ username, password } strings, the username non-empty and without ':'",
      );
    }
  }
  const acls = resolveAcls(options.acl, auth);
  const clock = options.clock ?? systemClock;
  if (!clock || typeof clock.now !== "function") {
    throw configError(COMPONENT, "clock", clock, "a Clock with now() and sleepSync(ms)");
  }
  const clockToleranceMs = nonNegativeInt("clockToleranceMs", options.clockToleranceMs, 5);
  let peerClockCheck: ResolvedOptions["peerClockCheck"] = false;
  if (options.peerClockCheck !== false) {
    const peer = options.peerClockCheck ?? {};
    if (typeof peer !== "object") {
      throw configError(COMPONENT, "peerClockCheck", peer, "an object or false");
    }
    peerClockCheck = {
      maxSkewMs: positiveInt("peerClockCheck.maxSkewMs", peer.maxSkewMs, 5_000),
      liveWindowMs: positiveInt("peerClockCheck.liveWindowMs", peer.liveWindowMs, 10_000),
    };
  }
  const cacheFile = filePath("cacheFile", options.cacheFile, OWN_CACHE_FOLDER, "workerID.json");
  const javaCacheFile = filePath(
    "javaCacheFile",
    options.javaCacheFile,
    JAVA_LEAF_CACHE_FOLDER,
    "workerID.properties",
  );
  const stopWithoutSession = options.stopWithoutSession ?? false;
  if (typeof stopWithoutSession !== "boolean") {
    throw configError(COMPONENT, "stopWithoutSession", stopWithoutSession, "true or false");
  }
  const inUseWaitMs =
    options.inUseWaitMs === undefined
      ? undefined
      : nonNegativeInt("inUseWaitMs", options.inUseWaitMs, 0);
  return {
    url: options.url,
    servers,
    chroot,
    mode,
    sessionTimeoutMs,
    connectTimeoutMs,
    operationTimeoutMs,
    silenceLimitMs,
    auth,
    acls,
    clock,
    clockToleranceMs,
    peerClockCheck,
    cacheFile,
    inUseWaitMs,
    stopWithoutSession,
    javaCacheFile,
  };
}

/**
 * Java Leaf's cache folder `{java.io.tmpdir}/{leaf.name}/leafconf/{port}/`. Only Java Leaf writes
 * there: SnowflakeZookeeperHolder writes `workerID.properties` only when the file exists or when
 * its `mkdirs()` creates the folder, so any other file there first leaves a rolled-back Java Leaf
 * node with no cache to start from when ZooKeeper is down.
 */
const JAVA_LEAF_CACHE_FOLDER = "leafconf";
/** This package's cache folder, `{os.tmpdir()}/{name}/registry-zk/{port}/`, beside Java Leaf's. */
const OWN_CACHE_FOLDER = "registry-zk";

/**
 * A cache file option: a path, a function of the node, or false (none); undefined:
 * `{os.tmpdir()}/{name}/{folder}/{port}/{fileName}`.
 */
function filePath(
  key: string,
  value: string | ((node: NodeIdentity) => string) | false | undefined,
  folder: string,
  fileName: string,
): ((node: NodeIdentity) => string) | undefined {
  if (value === undefined) {
    return (node) => join(tmpdir(), node.name, folder, String(node.port), fileName);
  }
  if (typeof value === "string" && value !== "") return () => value;
  if (typeof value === "function") return value;
  if (value === false) return undefined;
  throw configError(COMPONENT, key, value, "a file path, a function of the node, or false");
}

const CONNECTION_STRING = '"host[:port][,host[:port]...][/chroot]", e.g. "127.0.0.1:2181/leaf"';

/** Splits `host[:port][,host[:port]...][/chroot]`; throws INVALID_CONFIG on anything else. */
export function parseConnectionString(value: unknown): { servers: string; chroot: string } {
  const expected = CONNECTION_STRING;
  if (typeof value !== "string" || value.trim() === "") {
    throw configError(COMPONENT, "url", value, expected);
  }
  const slash = value.indexOf("/");
  const servers = slash < 0 ? value : value.slice(0, slash);
  const chroot = slash < 0 ? "" : value.slice(slash);
  // host[:port]; port 2181 when absent, as ZooKeeper's own clients. node-zookeeper-client splits
  // on ':' and so cannot take IPv6 literals.
  const serverOk = (server: string) => {
    const match = /^([^\s:,/[\]]+)(?::(\d{1,5}))?$/.exec(server.trim());
    return (
      match !== null &&
      (match[2] === undefined || (Number(match[2]) > 0 && Number(match[2]) < 65536))
    );
  };
  if (!servers.split(",").every(serverOk)) {
    throw configError(
      COMPONENT,
      "url",
      value,
      `${expected} (host names or IPv4 addresses: the client library takes no IPv6 literals)`,
    );
  }
  if (chroot !== "" && (chroot === "/" || !isValidPath(chroot))) {
    throw configError(
      COMPONENT,
      "url",
      value,
      `${expected}; the chroot must be an absolute path such as /leaf, without a trailing '/'`,
    );
  }
  return { servers, chroot };
}

function isValidPath(path: string): boolean {
  return (
    path.startsWith("/") &&
    !path.endsWith("/") &&
    !path.includes("//") &&
    !/\/\.\.?(\/|$)/.test(path) &&
    // biome-ignore lint/suspicious/noControlCharactersInRegex: it rejects control characters
    !/[\u0000-\u001f\u007f]/.test(path)
  );
}

function positiveInt(key: string, value: unknown, fallback: number): number {
  if (value === undefined) return fallback;
  if (typeof value !== "number" || !Number.isSafeInteger(value) || value <= 0) {
    throw configError(COMPONENT, key, value, "a positive integer (ms)");
  }
  return value;
}

function nonNegativeInt(key: string, value: unknown, fallback: number): number {
  if (value === undefined) return fallback;
  if (typeof value !== "number" || !Number.isSafeInteger(value) || value < 0) {
    throw configError(COMPONENT, key, value, "a non-negative integer (ms)");
  }
  return value;
}
