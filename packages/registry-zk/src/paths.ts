// The ZooKeeper tree and the data of its nodes. Normal mode writes exactly what Java Leaf writes
// (`/snowflake/{name}/forever/{ip}:{port}-{10-digit sequence}`, `{"ip","port","timestamp"}`), so
// both can share a tree; everything else lives beside `forever` where Java Leaf never looks.
import { argumentError, configError, ErrorCodes, LeafError, type NodeIdentity } from "@leaf/core";
import { COMPONENT } from "./options";

/** Paths of one leaf name's tree. */
export interface LeafTree {
  /** `/snowflake/{name}` */
  root: string;
  /** `/snowflake/{name}/forever`: Java Leaf's persistent sequential node per ip:port. */
  forever: string;
  /** `/snowflake/{name}/temporary`: ephemeral marker per live ip:port (normal mode). */
  temporary: string;
  /** `/snowflake/{name}/recycle/workers`: persistent record per recyclable worker id. */
  recycleWorkers: string;
  /** `/snowflake/{name}/recycle/leases`: ephemeral lease per held recyclable worker id. */
  recycleLeases: string;
  /** `/snowflake/{name}/recycle/inuse`: the Leaf fork's in-use pool, never mixed with ours. */
  forkInUse: string;
}

/** The tree of leaf name `name`. */
export function leafTree(name: string): LeafTree {
  const root = `/snowflake/${name}`;
  return {
    root,
    forever: `${root}/forever`,
    temporary: `${root}/temporary`,
    recycleWorkers: `${root}/recycle/workers`,
    recycleLeases: `${root}/recycle/leases`,
    forkInUse: `${root}/recycle/inuse`,
  };
}

/**
 * ZooKeeper's rules on a node that checkAcquireRequest of @leaf/core has checked: the name is one
 * path segment, the ip holds no "/" or blanks (both are written into node names). Throws
 * INVALID_ARGUMENT naming the bad field.
 */
export function checkNodeForPaths(node: NodeIdentity): NodeIdentity {
  const { name, ip } = node;
  if (
    name === "." ||
    name === ".." ||
    name.includes("/") ||
    // biome-ignore lint/suspicious/noControlCharactersInRegex: it rejects control characters
    /[\u0000-\u001f\u007f]/.test(name)
  ) {
    throw argumentError(
      COMPONENT,
      "node.name",
      name,
      "a non-empty leaf name without '/' or control characters (one ZooKeeper path segment)",
    );
  }
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what it rejects
  if (/[/\s\u0000-\u001f\u007f]/.test(ip)) {
    throw argumentError(COMPONENT, "node.ip", ip, "an address such as 10.0.0.7, without '/'");
  }
  return node;
}

/**
 * Refuses a leaf name with a '-' for normal mode, whose tree Java Leaf shares: Java Leaf's
 * SnowflakeZookeeperHolder reads a new node's worker id by splitting its whole path
 * (`/snowflake/{name}/forever/{ip}:{port}-{sequence}`) on '-' and parsing the second piece, so with
 * a '-' in the name it fails (NumberFormatException) and a Java Leaf node could never join this
 * tree or take over from this one (a rollback). INVALID_CONFIG naming `key`.
 */
export function checkJavaLeafName(name: string, key: string): void {
  if (!name.includes("-")) return;
  throw configError(
    COMPONENT,
    key,
    name,
    `a leaf name without '-' in ZooKeeper normal mode (its tree is Java Leaf's, and Java Leaf reads a new node's worker id by splitting the node's path on '-': with ${JSON.stringify(name)} it fails with NumberFormatException, so no Java Leaf node could join or replace this one). Use '.' or '_' instead, e.g. ${JSON.stringify(name.replaceAll("-", "."))}`,
  );
}

/** Java Leaf's key of a node: `{ip}:{port}`. Backup ids get `{ip}:{port}~backup{k}` (k from 1). */
export function nodeKey(node: NodeIdentity, backup = 0): string {
  return backup === 0 ? `${node.ip}:${node.port}` : `${node.ip}:${node.port}~backup${backup}`;
}

/** A child of `forever`: `{key}-{sequence}`. */
export interface ForeverChild {
  /** The child's name. */
  name: string;
  /** `{ip}:{port}` (or a backup key). */
  key: string;
  /** The sequence number: the worker id. */
  sequence: number;
}

/** Parses a child name of `forever`; undefined when it is not `{key}-{digits}`. */
export function parseForeverChild(name: string): ForeverChild | undefined {
  const dash = name.lastIndexOf("-");
  if (dash <= 0) return undefined;
  const digits = name.slice(dash + 1);
  if (!/^\d{1,10}$/.test(digits)) return undefined;
  return { name, key: name.slice(0, dash), sequence: Number(digits) };
}

/** Java Leaf's data of a `forever` node. */
export interface Endpoint {
  ip: string;
  port: string;
  /** ms since the Unix epoch. */
  timestamp: number;
}

/** Java Leaf's JSON: `{"ip":"10.0.0.7","port":"8080","timestamp":1588421624602}`. */
export function encodeEndpoint(node: NodeIdentity, timestamp: number): Buffer {
  const endpoint: Endpoint = { ip: node.ip, port: String(node.port), timestamp };
  return Buffer.from(JSON.stringify(endpoint));
}

/** Parses a `forever` node's data; throws CORRUPT_DATA naming the path. */
export function decodeEndpoint(path: string, data: Buffer): Endpoint {
  const value = parseJson(path, data) as Partial<Endpoint> & { port?: unknown };
  const timestamp = value.timestamp;
  if (typeof timestamp !== "number" || !Number.isSafeInteger(timestamp) || timestamp < 0) {
    throw corrupt(path, `"timestamp" is ${JSON.stringify(timestamp)}, not ms since the epoch`);
  }
  return { ip: String(value.ip ?? ""), port: String(value.port ?? ""), timestamp };
}

/** The persistent record of a recyclable worker id. */
export interface WorkerRecord {
  workerId: number;
  /** Highest timestamp ever reported under this id, ms since the Unix epoch (0: never used). */
  timestamp: number;
  /** The last holder, for operators and for giving a restarting node its id back. */
  ip: string;
  port: string;
  /**
   * The holder's horizon, ms since the Unix epoch (its clock at a write + `silenceLimitMs`): it
   * issues nothing timestamped past it, and the next holder starts after it. 0 once released with
   * a final timestamp; absent in a record just created, before its holder's first write.
   */
  horizon?: number;
  /** The writer's clock (ms) when it sent this write: its clock sample for the peer clock check. */
  at?: number;
}

/**
 * `{"workerId":7,"timestamp":1767225600000,"ip":"10.0.0.7","port":"8080","horizon":1767225604000,
 * "at":1767225600000}`
 */
export function encodeRecord(record: WorkerRecord): Buffer {
  return Buffer.from(JSON.stringify(record));
}

/** Parses a worker record; throws CORRUPT_DATA naming the path. */
export function decodeRecord(path: string, data: Buffer, workerId: number): WorkerRecord {
  const value = parseJson(path, data) as Partial<WorkerRecord>;
  const timestamp = value.timestamp;
  if (typeof timestamp !== "number" || !Number.isSafeInteger(timestamp) || timestamp < 0) {
    throw corrupt(path, `"timestamp" is ${JSON.stringify(timestamp)}, not ms since the epoch`);
  }
  if (value.workerId !== workerId) {
    throw corrupt(path, `"workerId" is ${JSON.stringify(value.workerId)}, expected ${workerId}`);
  }
  const optionalMs = (key: "horizon" | "at"): number | undefined => {
    const ms = value[key];
    if (ms === undefined) return undefined;
    if (typeof ms !== "number" || !Number.isSafeInteger(ms) || ms < 0) {
      throw corrupt(path, `"${key}" is ${JSON.stringify(ms)}, not ms since the epoch`);
    }
    return ms;
  };
  return {
    workerId,
    timestamp,
    ip: String(value.ip ?? ""),
    port: String(value.port ?? ""),
    horizon: optionalMs("horizon"),
    at: optionalMs("at"),
  };
}

/** Data of an ephemeral node (lease or live marker): who holds it, for operators and waiters. */
export interface HolderInfo {
  ip: string;
  port: string;
  /** Worker id held (normal mode: the primary). */
  workerId: number;
  pid: number;
  /** Session timeout the holder negotiated, ms: how long its node can outlive a crash. */
  sessionTimeoutMs: number;
  /** When it was taken, ms since the Unix epoch (holder's clock). */
  since: number;
}

/** `{"ip":..,"port":..,"workerId":..,"pid":..,"sessionTimeoutMs":..,"since":..}` */
export function encodeHolder(holder: HolderInfo): Buffer {
  return Buffer.from(JSON.stringify(holder));
}

/** Parses holder data leniently (it only informs): undefined when unreadable. */
export function decodeHolder(data: Buffer | undefined): Partial<HolderInfo> | undefined {
  if (!data || data.length === 0) return undefined;
  try {
    const value = JSON.parse(data.toString("utf8"));
    return value && typeof value === "object" ? value : undefined;
  } catch {
    return undefined;
  }
}

function parseJson(path: string, data: Buffer): Record<string, unknown> {
  let value: unknown;
  try {
    value = JSON.parse(data.toString("utf8"));
  } catch {
    throw corrupt(path, `data ${JSON.stringify(data.toString("utf8").slice(0, 80))} is not JSON`);
  }
  if (!value || typeof value !== "object") throw corrupt(path, "data is not a JSON object");
  return value as Record<string, unknown>;
}

function corrupt(path: string, what: string): LeafError {
  return new LeafError({
    component: COMPONENT,
    code: ErrorCodes.CORRUPT_DATA,
    message: `ZooKeeper node ${path} is not usable: ${what}; fix or delete the node`,
    details: { path },
  });
}

/** The key of `node` in the registry's contested nodes (RegistryContext): its name and `ip:port`. */
export function contestedKey(node: NodeIdentity): string {
  return `${node.name}/${nodeKey(node)}`;
}
