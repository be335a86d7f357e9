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
