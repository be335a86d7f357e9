// The fork's `leaf.snowflake.local.workIdMap`: which worker id each node ("ip:port") uses, given as
// the JSON text of the property or as an object. A value may also list backup ids after the
// primary.
import { configError } from "@leaf/core";

/** The component name in error messages. */
export const COMPONENT = "registry-local";

/**
 * One node's entry: its worker id (a number or a decimal string, as the fork's examples write it),
 * or a list whose first element is the primary id and the rest are backup ids.
 */
export type WorkIdMapValue = number | string | readonly (number | string)[];

/** `{"10.1.46.33:8080": 1, "10.1.46.33:8081": 2}`, or the same as JSON text. */
export type WorkIdMap = string | Readonly<Record<string, WorkIdMapValue>>;

/**
 * Parses and checks a work id map. Returns, per "ip:port", the worker ids in order (primary first).
 * Throws INVALID_CONFIG naming `key` for text that is not JSON, a key that is not "ip:port", an id
 * that is not a non-negative integer, or an id given to two nodes.
 */
export function parseWorkIdMap(value: WorkIdMap, key = "workIdMap"): Map<string, number[]> {
  const example = 'an object like {"10.1.46.33:8080": 1, "10.1.46.33:8081": 2}';
  let data: unknown = value;
  if (typeof value === "string") {
    try {
      data = JSON.parse(value);
    } catch {
      throw configError(COMPONENT, key, value, `JSON text of ${example}`);
    }
  }
  if (typeof data !== "object" || data === null || Array.isArray(data)) {
    throw configError(COMPONENT, key, value, example);
  }
  const entries = Object.entries(data as Record<string, unknown>);
  if (entries.length === 0) throw configError(COMPONENT, key, value, `${example}, not empty`);
  const result = new Map<string, number[]>();
  const usedBy = new Map<number, string>();
  for (const [node, raw] of entries) {
    if (!isNodeKey(node)) {
      throw configError(COMPONENT, `${key} key`, node, '"ip:port" with a port from 1 to 65535');
    }
    const list = Array.isArray(raw) ? raw : [raw];
    if (list.length === 0) {
      throw configError(COMPONENT, `${key}["${node}"]`, raw, "a worker id or a non-empty list");
    }
    const ids = list.map((item) => toWorkerId(item, `${key}["${node}"]`));
    for (const id of ids) {
      const other = usedBy.get(id);
      if (other !== undefined) {
        throw configError(
          COMPONENT,
          `${key}["${node}"]`,
          raw,
          `worker ids no other node uses (worker id ${id} is also given to ${other})`,
        );
      }
      usedBy.set(id, node);
    }
    result.set(node, ids);
  }
  return result;
}

/** Checks a configured worker id (a number or decimal string) and returns it as a number. */
export function toWorkerId(value: unknown, key: string): number {
  const number =
    typeof value === "string" && /^\d{1,9}$/.test(value.trim()) ? Number(value.trim()) : value;
  if (typeof number !== "number" || !Number.isSafeInteger(number) || number < 0) {
    throw configError(COMPONENT, key, value, "a worker id: an integer of 0 or more");
  }
  return number;
}

function isNodeKey(key: string): boolean {
  const colon = key.lastIndexOf(":");
  if (colon <= 0) return false;
  const port = key.slice(colon + 1);
  return /^\d{1,5}$/.test(port) && Number(port) >= 1 && Number(port) <= 65535;
}
