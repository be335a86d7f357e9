// Checks on what acquire() and report() are given, shared by both modes.
import { type AcquireRequest, argumentError, type NodeIdentity } from "@leaf/core";
import { COMPONENT } from "./database";

/** A checked acquire request. */
export interface CheckedRequest {
  node: NodeIdentity;
  /** "ip:port", the node's key in both tables. */
  key: string;
  maxWorkerId: number;
  backups: number;
  signal: AbortSignal | undefined;
}

/** Checks an acquire request, naming the first bad field. */
export function checkRequest(request: AcquireRequest): CheckedRequest {
  const { node, maxWorkerId } = request;
  const backups = request.backups ?? 0;
  if (!node || typeof node.name !== "string" || node.name === "" || node.name.length > 128) {
    throw argumentError(
      COMPONENT,
      "node.name",
      node?.name,
      "a service name of 1 to 128 characters",
    );
  }
  if (typeof node.ip !== "string" || node.ip === "" || node.ip.length > 120) {
    throw argumentError(COMPONENT, "node.ip", node.ip, "the node's address, e.g. 10.1.46.33");
  }
  if (!Number.isInteger(node.port) || node.port < 0 || node.port > 65535) {
    throw argumentError(COMPONENT, "node.port", node.port, "a port from 0 to 65535");
  }
  if (!Number.isSafeInteger(maxWorkerId) || maxWorkerId < 0 || maxWorkerId > 2 ** 31 - 1) {
    throw argumentError(COMPONENT, "maxWorkerId", maxWorkerId, "an integer from 0 to 2^31-1");
  }
  if (!Number.isInteger(backups) || backups < 0) {
    throw argumentError(COMPONENT, "backups", backups, "an integer of 0 or more");
  }
  request.signal?.throwIfAborted();
  return {
    node,
    key: `${node.ip}:${node.port}`,
    maxWorkerId,
    backups,
    signal: request.signal,
  };
}

/** Checks a reported timestamp (ms since the Unix epoch). */
export function checkTimestamp(name: string, value: unknown): asserts value is number {
  if (typeof value !== "number" || !Number.isSafeInteger(value) || value < 0) {
    throw argumentError(COMPONENT, name, value, "a timestamp in ms since the Unix epoch");
  }
}

/** Reads a BIGINT column that mysql2 returns as a number or (when large) a string. */
export function toMs(value: unknown): number {
  if (value === null || value === undefined) return 0;
  const number = typeof value === "number" ? value : Number(value);
  return Number.isSafeInteger(number) && number > 0 ? number : 0;
}
