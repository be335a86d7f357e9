// Ranges of one residue class (a residue set's database hands out only ids `id % stride ===
// remainder`): their first id, how many ids they hold, and the floors the generator judges them by,
// one per class, since ranges of different databases of a set interleave.
import type { SegmentRange } from "./segment-store";

/** True when `range` holds only one residue class of its ids (a stride above 1). */
export function isStrided(range: SegmentRange): boolean {
  return range.stride !== undefined && range.stride > 1;
}

/** The first id of `range` (its start, or the first id of its class at or above it). */
export function firstIdOf(range: SegmentRange): bigint {
  if (!isStrided(range)) return range.start;
  const stride = BigInt(range.stride!);
  const offset = (BigInt(range.remainder ?? 0) - (range.start % stride) + stride) % stride;
  return range.start + offset;
}

/** Ids of `range` from `from` (an id of its class, or its start) up to its end. */
export function idsLeftIn(range: SegmentRange, from: bigint = firstIdOf(range)): bigint {
  if (from >= range.end) return 0n;
  if (!isStrided(range)) return range.end - from;
  const stride = BigInt(range.stride!);
  return (range.end - from + stride - 1n) / stride;
}

/** The residue class of a strided range, as a snapshot shows it; nothing for a contiguous one. */
export function residueOf(range: { stride?: number; remainder?: number }): {
  stride?: number;
  remainder?: number;
} {
  return range.stride !== undefined && range.stride > 1
    ? { stride: range.stride, remainder: range.remainder ?? 0 }
    : {};
}

/** "stride/remainder" of a strided range, "" for a contiguous one. */
export function classKey(range: { stride?: number; remainder?: number }): string {
  return range.stride !== undefined && range.stride > 1
    ? `${range.stride}/${range.remainder ?? 0}`
    : "";
}

/**
 * What the generator has accepted of a tag's strided ranges: per class, the end of its highest
 * range; per stride, the highest end of any class. A strided range must start at or above its
 * class's end, and at or above the end of every range of another stride: a residue set re-formed
 * with more databases starts every database above every id handed out before, so a range of the
 * old stride after one of the new (or the reverse order) is a misconfiguration, refused.
 */
export class StrideFloors {
  private readonly classes = new Map<string, bigint>();
  private readonly strides = new Map<number, bigint>();

  /**
   * The lowest start allowed for `range`: for a strided one, the end of its class and of every
   * other stride and `contiguousEnd` (the end of the contiguous ranges accepted); for a contiguous
   * one, the end of every strided range.
   */
  floorOf(range: SegmentRange, contiguousEnd: bigint): bigint {
    const stride = isStrided(range) ? range.stride! : 1;
    let floor = stride === 1 ? contiguousEnd : (this.classes.get(classKey(range)) ?? 0n);
    if (stride !== 1 && contiguousEnd > floor) floor = contiguousEnd;
    for (const [other, end] of this.strides) if (other !== stride && end > floor) floor = end;
    return floor;
  }

  /** Records an accepted strided range. */
  accept(range: SegmentRange): void {
    const key = classKey(range);
    if ((this.classes.get(key) ?? 0n) < range.end) this.classes.set(key, range.end);
    const stride = range.stride!;
    if ((this.strides.get(stride) ?? 0n) < range.end) this.strides.set(stride, range.end);
  }
}
