// What the registry knows about node-zookeeper-client 1.x beyond its typings: ZooKeeper's error
// codes it branches on, node stats as plain numbers, watchers as three event names, the patch that
// keeps newer servers' error codes from crashing the process, and a close that always lets go of
// the socket. Kept apart from the session so that the session reads as its liveness rules.

import { LeafError } from "@leaf/core";
import zookeeper from "node-zookeeper-client";

/** A node's metadata, with the times as numbers (ms, ZooKeeper's clock). */
export interface NodeStat {
  version: number;
  cversion: number;
  numChildren: number;
  /** Creation time on the server, ms since the Unix epoch. */
  ctime: number;
  /** Last modification time on the server, ms since the Unix epoch. */
  mtime: number;
  /** Session id (16 hex digits) of an ephemeral node's owner; "0000000000000000" otherwise. */
  ephemeralOwner: string;
}

/** One operation of a multi (ZooKeeper transaction). */
export type MultiOp =
  | { op: "create"; path: string; data: Buffer; mode: "persistent" | "ephemeral" }
  | { op: "setData"; path: string; data: Buffer; version: number }
  | { op: "check"; path: string; version: number }
  | { op: "remove"; path: string; version: number };

/** ZooKeeper's error codes the registry branches on. */
export const ZkCodes = {
  NO_NODE: zookeeper.Exception.NO_NODE,
  NODE_EXISTS: zookeeper.Exception.NODE_EXISTS,
  BAD_VERSION: zookeeper.Exception.BAD_VERSION,
  NOT_EMPTY: zookeeper.Exception.NOT_EMPTY,
  NO_AUTH: zookeeper.Exception.NO_AUTH,
} as const;

/** The ZooKeeper error code carried by a LeafError from a session request, if any. */
export function zkCode(error: unknown): number | undefined {
  if (error instanceof LeafError && typeof error.details.zkCode === "number") {
    return error.details.zkCode;
  }
  return undefined;
}

const wrapped = Symbol.for("@leaf/registry-zk/tolerant-exception-codes");

/**
 * node-zookeeper-client 1.1.3 (the latest) knows ZooKeeper's error codes up to -115. Newer servers
 * (3.5 to 3.9) also answer -118 (session moved), -119 (not read-only), -124 (quota exceeded),
 * -127 (throttled) and others, and the client then throws "Unknown code" inside its socket
 * handler: an uncaught exception that takes the whole process down, seen around server restarts.
 * Its `Exception.create` is looked up on the module at every call, so it is wrapped once: an
 * unknown code becomes an ordinary failed request (the session judges it as any other error).
 */
export function acceptNewerErrorCodes(): void {
  const Exception = zookeeper.Exception as unknown as {
    create: (code: number, path?: string) => Error;
    prototype: Error;
  } & { [wrapped]?: true };
  if (Exception[wrapped]) return;
  const create = Exception.create;
  const tolerant = (code: number, path?: string): Error => {
    try {
      return create(code, path);
    } catch {
      // The constructor refuses unknown codes too: build the same shape by hand.
      const error = Object.create(Exception.prototype) as Error & { code: number; path?: string };
      Error.captureStackTrace(error, tolerant);
      const name = `SERVER_ERROR_${code}`;
      error.code = code;
      error.name = name;
      error.path = path;
      error.message = `Exception: ${name}[${code}]${path ? `@${path}` : ""}`;
      return error;
    }
  };
  Exception.create = tolerant;
  Exception[wrapped] = true;
}

/** Connection-manager state "closed" (node-zookeeper-client 1.x internals). */
const CLOSED_STATE = -2;

interface Internals {
  connectionManager?: {
    state: number;
    socket?: { destroy(): void; destroyed?: boolean };
    on(event: "state", listener: (state: number) => void): void;
    removeListener(event: "state", listener: (state: number) => void): void;
  };
}

export function toStat(stat: zookeeper.Stat): NodeStat {
  return {
    version: stat.version,
    cversion: stat.cversion,
    numChildren: stat.numChildren,
    ctime: Number(stat.ctime.readBigInt64BE(0)),
    mtime: Number(stat.mtime.readBigInt64BE(0)),
    ephemeralOwner: stat.ephemeralOwner.toString("hex"),
  };
}

export function toWatcher(
  watcher: (type: "deleted" | "changed" | "created") => void,
): (event: zookeeper.Event) => void {
  return (event) => {
    const type = event.getType();
    if (type === zookeeper.Event.NODE_DELETED) watcher("deleted");
    else if (type === zookeeper.Event.NODE_DATA_CHANGED) watcher("changed");
    else if (type === zookeeper.Event.NODE_CREATED) watcher("created");
  };
}

/**
 * Closes a client and makes sure its socket goes: against a hung server the close request is never
 * answered and the library would keep the socket (and the process) alive. Resolves once the server
 * has answered the close (so the session's ephemeral nodes are gone) or the socket was destroyed.
 */
export function forceClose(client: zookeeper.Client): Promise<void> {
  const manager = (client as unknown as Internals).connectionManager;
  try {
    client.close();
  } catch {
    // Already closed.
  }
  if (!manager || manager.state === CLOSED_STATE) return Promise.resolve();
  return new Promise((resolve) => {
    const onState = (state: number) => {
      if (state !== CLOSED_STATE) return;
      clearTimeout(timer);
      manager.removeListener("state", onState);
      resolve();
    };
    const timer = setTimeout(() => {
      manager.removeListener("state", onState);
      if (manager.state !== CLOSED_STATE) manager.socket?.destroy();
      resolve();
    }, 1_000);
    timer.unref();
    manager.on("state", onState);
  });
}
