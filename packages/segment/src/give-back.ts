// Giving back on a graceful close: the ids a tag's buffer holds and never handed out (the rest of
// the current range, the ranges ahead, a range that arrived while closing) go back to the store
// when they end at the stored max id; the store's compare-and-set decides whether that still holds.

import { classKey } from "./residue-range";
import type { TagBuffer } from "./segment-buffer";
import type { RangeResidue, SegmentStore } from "./segment-store";
import { message } from "./tag-loader";

/** What `close()` did with the unused ids of one tag. */
export interface GiveBackOutcome {
  tag: string;
  /** First id not handed out (the stored max id after a give-back). */
  from: bigint;
  /** One past the last id held: the stored max id the give-back compared against. */
  end: bigint;
  /**
   * `given-back`: the store's max id is now `from`, so the next range starts there.
   * `taken-since`: a range was taken after this one (by another process or generator): nothing
   * changed, the ids are a gap. `skipped`: not tried (`reason` says why: the store has no
   * `giveBack`, the tag was refused, or its last load failed, so the node cannot be sure where the
   * max id stands). `failed`: the store call failed (`reason`): a gap, never a duplicate.
   */
  outcome: "given-back" | "taken-since" | "skipped" | "failed";
  reason?: string;
}

/**
 * The ids `b` holds and never handed out that end at the end of its last range: the current
 * range's rest, then every range after it, kept only as far back as they follow each other with no
 * gap (another process's range in between cuts the run) and are of one residue class (ranges of a
 * residue set's databases: `residue` names it). Undefined when it holds none.
 */
export function unusedTail(
  b: TagBuffer,
): { from: bigint; end: bigint; residue?: RangeResidue } | undefined {
  const pieces: { start: bigint; end: bigint; stride?: number; remainder?: number }[] = [];
  if (b.initialized) {
    const current = { start: b.position(), end: b.end };
    pieces.push(
      b.stride > 1n ? { ...current, stride: Number(b.stride), remainder: b.remainder } : current,
    );
  }
  for (const r of b.ahead) pieces.push(r);
  for (const r of b.late) pieces.push(r);
  const last = pieces.at(-1);
  if (last === undefined) return undefined;
  const key = classKey(last);
  let from = last.start;
  for (
    let i = pieces.length - 2;
    i >= 0 && pieces[i]!.end === from && classKey(pieces[i]!) === key;
    i--
  )
    from = pieces[i]!.start;
  if (from >= last.end) return undefined;
  return key === ""
    ? { from, end: last.end }
    : { from, end: last.end, residue: { stride: last.stride!, remainder: last.remainder ?? 0 } };
}

/**
 * Gives back the unused tail of each of `buffers` (already removed from serving, with no load in
 * flight), one store call per tag, each after `before(tag, from, end)` resolved. Never throws: each
 * tag's outcome says what happened.
 */
export async function giveBackAll(
  store: SegmentStore,
  buffers: TagBuffer[],
  before?: (tag: string, from: bigint, end: bigint) => Promise<void>,
): Promise<GiveBackOutcome[]> {
  const outcomes: GiveBackOutcome[] = [];
  for (const b of buffers) {
    const tail = unusedTail(b);
    if (tail === undefined) continue;
    const base = { tag: b.tag, from: tail.from, end: tail.end };
    const unsure =
      store.giveBack === undefined
        ? `the ${store.kind} store cannot give back`
        : b.refused !== undefined
          ? "the tag was refused (CORRUPT_DATA)"
          : b.consecutiveFailures > 0
            ? `its last load failed (${message(b.lastError)}): the store may have moved its max id for a range this node never saw`
            : undefined;
    if (unsure !== undefined) {
      outcomes.push({ ...base, outcome: "skipped", reason: unsure });
      continue;
    }
    try {
      // The node's high-water mark comes down to `from` first: once the store's max id is `from`,
      // a mark above it would refuse the tag at the next start. If the mark cannot be lowered,
      // nothing is given back (a gap).
      await before?.(b.tag, tail.from, tail.end);
    } catch (error) {
      outcomes.push({ ...base, outcome: "skipped", reason: message(error) });
      continue;
    }
    try {
      const given =
        tail.residue === undefined
          ? await store.giveBack!(b.tag, tail.from, tail.end)
          : await store.giveBack!(b.tag, tail.from, tail.end, tail.residue);
      outcomes.push({ ...base, outcome: given ? "given-back" : "taken-since" });
    } catch (error) {
      outcomes.push({ ...base, outcome: "failed", reason: message(error) });
    }
  }
  return outcomes;
}
