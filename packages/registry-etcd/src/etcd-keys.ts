// Where the etcd registry keeps its state: per service, one holder key per held id (attached to the
// holder's etcd lease, so etcd deletes it when the lease expires) and one record per id ever used
// (no lease: it keeps the id's timestamps after every holder is gone).
import { ErrorCodes, LeafError } from "@leaf/core";
import type { IKeyValue } from "etcd3";

export const COMPONENT = "registry-etcd";

/** What etcd keeps per worker id, with no lease, in `<prefix>/<service>/id/<n>`. */
export interface IdRecord {
  /** Highest timestamp (ms since the Unix epoch) reported for the id; never lowered. */
  timestamp: number;
  /**
   * The last instant (ms, the holder's clock) until which the current or last holder may issue ids
   * without another confirmed renewal; 0 once it released the id with a final report. A holder
   * that vanished may have issued ids up to it, so the next holder starts after it.
   */
  horizon: number;
  /** "ip:port" of the node that held it last: it gets it back first. */
  node: string;
}

/** The content of a holder key: who holds the id, for people reading etcd and for the guard. */
export interface HolderValue {
  /** Random, one per acquire: the guard of every write is "the holder key still holds this". */
  token: string;
  node: string;
  host: string;
  pid: number;
  /** The etcd lease id (decimal) the holder key is attached to. */
  lease: string;
  since: string;
}

/** The keys of one service's worker-id space. */
export class Keyspace {
  /** `<prefix>/<service>/`, the common prefix of every key of this service. */
  readonly root: string;

  constructor(prefix: string, service: string) {
    // The service name is encoded so that a "/" in it cannot reach into another service's keys.
    this.root = `${prefix}/${encodeURIComponent(service)}/`;
  }

  /** The key, attached to the holder's etcd lease, that exists while id `workerId` is held. */
  holder(workerId: number): string {
    return `${this.root}holder/${workerId}`;
  }

  /** The key that keeps id `workerId`'s {@link IdRecord}. */
  record(workerId: number): string {
    return `${this.root}id/${workerId}`;
  }

  /** Which key of this space `key` is, or undefined for a key that is not one of ours. */
  parse(key: string): { kind: "holder" | "id"; workerId: number } | undefined {
    if (!key.startsWith(this.root)) return undefined;
    const match = /^(holder|id)\/(0|[1-9]\d{0,15})$/.exec(key.slice(this.root.length));
    if (!match) return undefined;
    return { kind: match[1] as "holder" | "id", workerId: Number(match[2]) };
  }
}

/** The text of a record, as stored. */
export function encodeRecord(record: IdRecord): string {
  return JSON.stringify(record);
}

/** Reads a stored record; CORRUPT_DATA naming the key when it is not one (never a silent 0). */
export function decodeRecord(key: string, text: string): IdRecord {
  let value: Partial<IdRecord> | undefined;
  try {
    value = JSON.parse(text) as Partial<IdRecord>;
  } catch {
    value = undefined;
  }
  const time = (v: unknown) => typeof v === "number" && Number.isSafeInteger(v) && v >= 0;
  if (
    !value ||
    typeof value !== "object" ||
    !time(value.timestamp) ||
    !time(value.horizon) ||
    typeof value.node !== "string"
  ) {
    throw new LeafError({
      component: COMPONENT,
      code: ErrorCodes.CORRUPT_DATA,
      message:
        `etcd key ${key} is not a worker-id record: ${JSON.stringify(text.slice(0, 120))}; ` +
        'expected {"timestamp":ms,"horizon":ms,"node":"ip:port"}. Restore it, or delete it only if ' +
        "no id was ever issued under this worker id (its timestamps would be lost)",
      details: { key },
    });
  }
  return value as IdRecord;
}

/**
 * The timestamp a new holder must start after: the reports, and what a vanished holder may have
 * issued.
 */
export function floorOf(record: IdRecord | undefined): number {
  return record ? Math.max(record.timestamp, record.horizon) : 0;
}

/** A record as read, with its revision (which a write's guard compares). */
export interface Stored {
  key: string;
  text: string;
  modRevision: string;
}

/** The record `kv` of `key` as read. */
export function stored(key: string, kv: IKeyValue): Stored {
  return { key, text: kv.value.toString(), modRevision: String(kv.mod_revision) };
}

/** The record of `s`; CORRUPT_DATA when it is not one. */
export function recordOf(s: Stored | undefined): IdRecord | undefined {
  return s ? decodeRecord(s.key, s.text) : undefined;
}
