// What the scripts' LEAF_* error replies mean, as the Leaf errors every segment store gives: the
// segment package's own for a tag's row (unknown, exists, a damaged or moved-back max id, used up),
// and this store's for its namespace (marker missing, fenced, settings differ, a lost key).
import { ErrorCodes, LeafError } from "@leaf/core";
import {
  badStoredMaxId,
  badStoredStep,
  belowDeletedTag,
  maxIdMovedBack,
  rangeOverflow,
  tagExists,
  unknownTag,
} from "@leaf/segment/adapter";
import { COMPONENT } from "./redis-store-options";

/** A LEAF_* reply of a script: its kind and its JSON fields. */
export interface ScriptRefusal {
  kind: string;
  fields: Record<string, unknown>;
}

/** Reads a `LEAF_<KIND> <json>` error reply; undefined for any other message. */
export function parseRefusal(message: string): ScriptRefusal | undefined {
  const match = /^LEAF_([A-Z_]+) (\{.*\}|\[\])$/s.exec(message);
  if (!match) return undefined;
  try {
    const fields = JSON.parse(match[2]!) as unknown;
    return {
      kind: match[1]!,
      fields:
        fields !== null && typeof fields === "object" && !Array.isArray(fields)
          ? (fields as Record<string, unknown>)
          : {},
    };
  } catch {
    return undefined;
  }
}

/** What the store tells a refusal with: where the namespace is, and its settings. */
export interface RefusalContext {
  /** `namespace "leaf" in Redis at redis://...`. */
  where: string;
  namespace: string;
  markerKey: string;
  waitReplicas: number;
  /** For LEAF_BELOW_FLOOR: the run id the floor's range came from. */
  floorSource?: string | undefined;
  /** For LEAF_BELOW_FLOOR: the floor sent. */
  floor?: bigint;
  /** For LEAF_BELOW_FLOOR: the floor sent was the caller's high-water mark. */
  mark?: boolean;
}

/** The Leaf error of a script's refusal. */
export function refusalError(refusal: ScriptRefusal, context: RefusalContext): LeafError {
  const f = refusal.fields;
  const tag = String(f.tag ?? "");
  switch (refusal.kind) {
    case "UNKNOWN":
      return unknownTag(tag, context.where);
    case "EXISTS":
      return tagExists(tag, context.where);
    case "BELOW":
      return f.gone === "1"
        ? lostKeyBelow(tag, BigInt(String(f.min)), context)
        : belowDeletedTag(tag, BigInt(String(f.start ?? 0)), BigInt(String(f.min)), context.where);
    case "BAD_STEP":
      return badStoredStep(tag, f.step, context.where);
    case "BAD_MAX":
      return badMax(tag, String(f.max), context.where);
    case "BAD_MARK":
      return badMark(tag, String(f.field ?? ""), String(f.value ?? ""), context);
    case "EXHAUSTED":
      return rangeOverflow(tag, BigInt(String(f.max)), Number(f.step));
    case "BEHIND":
      return maxIdMovedBack(tag, BigInt(String(f.max)), BigInt(String(f.high)), context.where);
    case "BELOW_FLOOR": {
      const runId = String(f.run_id ?? "");
      const from = context.floorSource;
      return maxIdMovedBack(
        tag,
        BigInt(String(f.max)),
        context.floor ?? 0n,
        context.where,
        from === undefined || from === runId || context.mark === true
          ? { mark: context.mark === true }
          : { stale: { host: `Redis run ${runId}`, from: `Redis run ${from}` } },
      );
    }
    case "GONE":
      return lostKey([tag], { [tag]: String(f.high ?? "") }, context);
    case "GONE_TAGS":
      return lostKey(Array.isArray(f.tags) ? f.tags.map(String) : [], {}, context);
    case "MISSING":
      return markerMissing(context);
    case "FENCED":
      return fenced(String(f.reason ?? ""), String(f.at ?? ""), context);
    case "SETTINGS":
      return new LeafError({
        component: COMPONENT,
        code: ErrorCodes.INVALID_CONFIG,
        message:
          `${context.where} was created with waitReplicas ${String(f.wait_replicas) || "(none)"}, ` +
          `this store has ${context.waitReplicas}: every store of a namespace must wait for the same ` +
          "replicas (a failover is accepted on the strength of it). Use the recorded value, or another namespace",
        details: {
          key: "waitReplicas",
          recorded: String(f.wait_replicas ?? ""),
          configured: context.waitReplicas,
        },
      });
    case "LIFT_OVERFLOW":
      return new LeafError({
        component: COMPONENT,
        code: ErrorCodes.INVALID_ARGUMENT,
        message: `raiseBy would take tag ${JSON.stringify(tag)} (max id ${String(f.max)}) past 2^63 - 1 in ${context.where}; nothing was changed. Give a smaller raiseBy`,
        details: { tag, maxId: String(f.max) },
      });
    default:
      return new LeafError({
        component: COMPONENT,
        code: ErrorCodes.CORRUPT_DATA,
        message: `unexpected refusal ${refusal.kind} from ${context.where}: ${JSON.stringify(f)}`,
        details: { refusal: refusal.kind },
      });
  }
}

/** A max id that is not 0 .. 2^63 - 1 written in decimal (a damaged key). */
function badMax(tag: string, max: string, where: string): LeafError {
  if (/^-\d+$/.test(max)) return badStoredMaxId(tag, BigInt(max), where);
  return new LeafError({
    component: COMPONENT,
    code: ErrorCodes.CORRUPT_DATA,
    message:
      `refused tag ${JSON.stringify(tag)}: its stored max id is ${JSON.stringify(max)} in ${where}, ` +
      "expected a decimal integer from 0 to 2^63 - 1; nothing was changed. Fix the key (HSET max_id to " +
      "a value above every id handed out)",
    details: { tag, reason: "bad-max-id", maxId: max },
  });
}

/**
 * The marker's copy of a tag's max id (`t:<tag>`) or a deleted tag's (`d:<tag>`) that is not 0 ..
 * 2^63 - 1 in decimal (edited by hand): the checks that rest on it (a max id set back, a tag
 * re-created below its old ids) cannot be made, so the tag is refused rather than served unchecked.
 */
function badMark(tag: string, field: string, value: string, context: RefusalContext): LeafError {
  return new LeafError({
    component: COMPONENT,
    code: ErrorCodes.CORRUPT_DATA,
    message:
      `refused tag ${JSON.stringify(tag)}: the namespace's marker ${context.markerKey} records its max id ` +
      `(field ${JSON.stringify(field)}) as ${JSON.stringify(value)} in ${context.where}, expected a decimal ` +
      "integer from 0 to 2^63 - 1; nothing was changed. The check that a max id never moves back rests on " +
      "it: fix the field (HSET it to the highest max id the tag ever had, at least its key's max_id)",
    details: { tag, reason: "bad-max-id", markerField: field, value },
  });
}

/**
 * A tag the marker records whose key is gone (deleted by hand, evicted): its ranges handed out ids
 * up to the recorded max id, so it is not treated as unknown (a re-create from 1 would repeat
 * them).
 */
function lostKey(
  tags: string[],
  highs: Record<string, string>,
  context: RefusalContext,
): LeafError {
  const named = tags.map((t) => JSON.stringify(t)).join(", ");
  const known = Object.entries(highs)
    .filter(([, high]) => high !== "")
    .map(([t, high]) => `${JSON.stringify(t)}: ${high}`);
  return new LeafError({
    component: COMPONENT,
    code: ErrorCodes.CORRUPT_DATA,
    message:
      `the key of tag ${named} is gone from ${context.where} while the namespace's marker still records ` +
      `the tag${known.length > 0 ? ` (max id ${known.join(", ")})` : ""}: it was deleted by hand or ` +
      "evicted. Nothing was changed, and the tag is refused: create it again (createTag) with a start id " +
      "at or above the recorded max id, or delete it",
    details: {
      tag: tags[0],
      tags,
      reason: "max-id-moved-back",
      lostKey: true,
      ...(Object.keys(highs).length > 0 ? { recordedMaxIds: highs } : {}),
    },
  });
}

function lostKeyBelow(tag: string, min: bigint, context: RefusalContext): LeafError {
  return new LeafError({
    component: COMPONENT,
    code: ErrorCodes.ALREADY_EXISTS,
    message:
      `tag ${JSON.stringify(tag)} lost its key in ${context.where} with max id ${min} recorded: ids below ` +
      `it were handed out, so it can be created again only at a start id of at least ${min}`,
    details: { tag, reason: "deleted", minStartId: min.toString(), lostKey: true },
  });
}

/** The namespace's marker is gone: never created, or Redis lost it. */
function markerMissing(context: RefusalContext): LeafError {
  return new LeafError({
    component: COMPONENT,
    code: ErrorCodes.CORRUPT_DATA,
    message:
      `${context.where} has no marker (${context.markerKey}): the namespace was never created, or Redis ` +
      "lost it (a restart without persistence, FLUSHALL, a failover to a replica without it, a hand " +
      "deletion), and with it every tag's max id and every deleted tag's. Ranges handed out before may " +
      "be handed out again, so nothing is served. For a new namespace: createNamespace(). After a loss: " +
      "restore the keys from a backup, or create the namespace and each tag again with a start id above " +
      "every id handed out",
    details: { reason: "stale-primary", takeover: "missing", marker: context.markerKey },
  });
}

const TAKEOVER_WHY: Record<string, string> = {
  restarted:
    "it is another Redis process than the one that wrote the marker (a restart, a restore from an older " +
    "snapshot, or a failover to a replica)",
  promoted:
    "it was promoted from a replica, and may have missed the last writes of the master it replaced",
  resynced:
    "it is the process that wrote the marker, but it was a replica since (it read from a master: a " +
    "full re-sync replaces its data) and is master again",
};

/** The namespace is fenced after a restart or failover that may have lost writes. */
function fenced(reason: string, at: string, context: RefusalContext): LeafError {
  const when = /^\d+$/.test(at) ? ` at ${new Date(Number(at)).toISOString()}` : "";
  return new LeafError({
    component: COMPONENT,
    code: ErrorCodes.CORRUPT_DATA,
    message:
      `${context.where} is fenced since${when}: ${TAKEOVER_WHY[reason] ?? reason}, so ranges handed out ` +
      "before may be missing from it and would be handed out again. Nothing is served until an operator " +
      "makes sure every tag's max id is above every id handed out and calls liftFence({ raiseBy }) (which " +
      "first raises every max id by raiseBy)",
    details: {
      reason: "stale-primary",
      takeover: reason,
      fencedAt: at,
      marker: context.markerKey,
    },
  });
}
