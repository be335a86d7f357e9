// Counting ids: every fault test collects the ids its nodes issued and checks that none repeats.

/** What {@link countDuplicates} found. */
export interface DuplicateCount<T> {
  /** Ids seen, repeats included. */
  total: number;
  /** Ids seen again after their first time (an id issued three times counts 2). */
  duplicates: number;
  /** The first few repeated ids, for the failure message. */
  examples: T[];
}

/**
 * Counts the ids that occur more than once across `lists` (bigint ids, or their decimal strings as
 * a server sent them; never mix the two in one call).
 */
export function countDuplicates<T extends bigint | string>(
  lists: Iterable<Iterable<T>>,
  examples = 5,
): DuplicateCount<T> {
  const seen = new Set<T>();
  const found: T[] = [];
  let total = 0;
  let duplicates = 0;
  for (const list of lists) {
    for (const id of list) {
      total++;
      if (seen.has(id)) {
        duplicates++;
        if (found.length < examples) found.push(id);
      } else {
        seen.add(id);
      }
    }
  }
  return { total, duplicates, examples: found };
}

/** Ids per chunk of an {@link IdLog}: 512 KiB. */
const LOG_CHUNK = 1 << 16;

/**
 * Ids kept as 64-bit integers, 8 bytes each and never as JS numbers, in the order pushed: for tests
 * that keep millions of ids (a Set of bigints takes about ten times the memory).
 */
export class IdLog {
  private readonly full: BigInt64Array[] = [];
  private current = new BigInt64Array(LOG_CHUNK);
  private used = 0;

  push(id: bigint): void {
    if (this.used === LOG_CHUNK) {
      this.full.push(this.current);
      this.current = new BigInt64Array(LOG_CHUNK);
      this.used = 0;
    }
    this.current[this.used++] = id;
  }

  get count(): number {
    return this.full.length * LOG_CHUNK + this.used;
  }

  /** The ids in the order pushed, as views on the log (no copy). */
  parts(): BigInt64Array[] {
    return [...this.full, this.current.subarray(0, this.used)];
  }

  /** The ids in the order pushed, as one array (a copy). */
  values(): BigInt64Array {
    return concatIds(this.parts());
  }
}

/** What {@link countRepeatedIds} found, with every id sorted (to read the highest, or ranges). */
export interface RepeatedIds extends DuplicateCount<bigint> {
  sorted: BigInt64Array;
}

/** 64-bit ids as a test keeps them in bulk. */
export type IdArray = BigInt64Array | BigUint64Array;

function concatIds(lists: Iterable<IdArray | IdLog>): BigInt64Array {
  const parts = [...lists].flatMap((l) => (l instanceof IdLog ? l.parts() : [l]));
  const all = new BigInt64Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const part of parts) {
    // Ids are below 2^63, so an unsigned array's values are the same in a signed one.
    all.set(part, at);
    at += part.length;
  }
  return all;
}

/**
 * {@link countDuplicates} for millions of ids: the lists are copied into one typed array and
 * sorted, so memory stays at 8 bytes per id; repeats are then neighbours.
 */
export function countRepeatedIds(lists: Iterable<IdArray | IdLog>, examples = 5): RepeatedIds {
  const sorted = concatIds(lists).sort();
  const found: bigint[] = [];
  let duplicates = 0;
  for (let i = 1; i < sorted.length; i++) {
    if (sorted[i] === sorted[i - 1]) {
      duplicates++;
      if (found.length < examples && found.at(-1) !== sorted[i]) found.push(sorted[i]!);
    }
  }
  return { total: sorted.length, duplicates, examples: found, sorted };
}
