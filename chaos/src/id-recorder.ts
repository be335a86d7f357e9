// Every id the load driver received, per id space (a segment tag, a snowflake service name, a
// redis-sequence namespace), as 64-bit integers in a growing BigInt64Array; sorted once at the end
// to count duplicates.

/** What sorting one space's ids found. */
export interface SpaceSummary {
  space: string;
  /** Ids received (every copy counted). */
  received: number;
  /** Ids received more than once: each extra copy counts one. Must be 0. */
  duplicates: number;
  /** Up to 10 duplicated ids, as decimal strings. */
  duplicateExamples: string[];
  /** Smallest and largest id, decimal strings ("" when none). */
  min: string;
  max: string;
}

/** The ids of one space. */
export class IdColumn {
  private data = new BigInt64Array(1 << 16);
  private size = 0;

  /** Number of ids recorded. */
  get length(): number {
    return this.size;
  }

  /** Appends ids (each must fit a signed 64-bit integer: ids are 0 .. 2^63 - 1). */
  push(ids: readonly bigint[]): void {
    if (this.size + ids.length > this.data.length) {
      let capacity = this.data.length * 2;
      while (capacity < this.size + ids.length) capacity *= 2;
      const grown = new BigInt64Array(capacity);
      grown.set(this.data.subarray(0, this.size));
      this.data = grown;
    }
    for (const id of ids) this.data[this.size++] = id;
  }

  /** The ids recorded so far (a view, in arrival order until {@link sorted} is called). */
  view(): BigInt64Array {
    return this.data.subarray(0, this.size);
  }

  /** Sorts the ids in place (numerically) and returns them. */
  sorted(): BigInt64Array {
    const view = this.view();
    view.sort();
    return view;
  }
}

/** Ids of every space of one scenario. */
export class IdRecorder {
  private readonly spaces = new Map<string, IdColumn>();

  /** Records `ids` under `space`. */
  add(space: string, ids: readonly bigint[]): void {
    let column = this.spaces.get(space);
    if (!column) {
      column = new IdColumn();
      this.spaces.set(space, column);
    }
    column.push(ids);
  }

  /** The column of `space` (empty when nothing was recorded). */
  column(space: string): IdColumn {
    return this.spaces.get(space) ?? new IdColumn();
  }

  /** Names of the spaces that received ids. */
  names(): string[] {
    return [...this.spaces.keys()].sort();
  }

  /** Total ids recorded in every space. */
  total(): number {
    let n = 0;
    for (const column of this.spaces.values()) n += column.length;
    return n;
  }

  /** Sorts every space and counts duplicates. */
  summarize(): SpaceSummary[] {
    return this.names().map((space) => summarizeColumn(space, this.spaces.get(space)!));
  }
}

/** Sorts a column and counts the ids that occur more than once. */
export function summarizeColumn(space: string, column: IdColumn): SpaceSummary {
  const ids = column.sorted();
  let duplicates = 0;
  const examples: string[] = [];
  for (let i = 1; i < ids.length; i++) {
    if (ids[i] === ids[i - 1]) {
      duplicates++;
      const text = ids[i]!.toString();
      if (examples.length < 10 && examples[examples.length - 1] !== text) examples.push(text);
    }
  }
  return {
    space,
    received: ids.length,
    duplicates,
    duplicateExamples: examples,
    min: ids.length > 0 ? ids[0]!.toString() : "",
    max: ids.length > 0 ? ids[ids.length - 1]!.toString() : "",
  };
}
