// Counting the ids `pnpm bench http` receives: tens of millions a minute through the batch paths,
// too many for a Set or even 8 bytes apiece. The answers arrive mostly as runs of consecutive ids
// (a segment range, a snowflake millisecond's sequence), so each answer file is read as runs
// [first, last], kept as two 64-bit logs (testkit's IdLog), and repeats are found where runs
// overlap: an id is twice in the answers exactly when two runs both cover it.
import { closeSync, openSync, readSync } from "node:fs";
import { IdLog } from "@leaf/testkit";

const NEWLINE = 0x0a;
const ZERO = 0x30;
const NINE = 0x39;
/** Digits of the largest 64-bit id (2^63 - 1). */
const MAX_DIGITS = 19;
const MAX_ID = (1n << 63n) - 1n;
const READ_CHUNK = 1 << 24;

/** What {@link IdRuns.count} found. */
export interface RunCount {
  /** Ids read, repeats included. */
  total: number;
  /** Ids read again after their first time (an id read three times counts 2). */
  duplicates: number;
  /** The lowest repeated id, if any. */
  example: bigint | undefined;
}

/** Ids as runs of consecutive values: read from answer files, counted for repeats. */
export class IdRuns {
  private readonly firsts = new IdLog();
  private readonly lasts = new IdLog();
  private total = 0;

  /**
   * Reads `path`: decimal ids, one a line (empty lines skipped), as the Leaf server answers a batch
   * in plain text. Returns how many ids it held. Anything else in the file is an error naming it.
   */
  addFile(path: string): number {
    const fd = openSync(path, "r");
    const buffer = Buffer.alloc(READ_CHUNK + MAX_DIGITS + 1);
    // The digits of the run's last id so far, and of the id being read (it may span two chunks).
    let last = new Uint8Array(MAX_DIGITS);
    let lastLength = 0;
    let current = new Uint8Array(MAX_DIGITS);
    let currentLength = 0;
    let first = ""; // the run's first id, "" while no run is open
    let count = 0;
    const closeRun = () => {
      if (first === "") return;
      this.firsts.push(toId(first));
      this.lasts.push(toId(Buffer.from(last.subarray(0, lastLength)).toString("latin1")));
    };
    try {
      for (;;) {
        const read = readSync(fd, buffer, 0, READ_CHUNK, null);
        for (let i = 0; i < read; i++) {
          const byte = buffer[i]!;
          if (byte !== NEWLINE) {
            if (byte < ZERO || byte > NINE || currentLength === MAX_DIGITS) {
              throw new Error(
                `${path}: expected decimal ids of at most ${MAX_DIGITS} digits, one a line, got ${JSON.stringify(
                  `${Buffer.from(current.subarray(0, currentLength)).toString("latin1")}${String.fromCharCode(byte)}`,
                )}`,
              );
            }
            current[currentLength++] = byte;
            continue;
          }
          if (currentLength === 0) continue;
          if (currentLength > 1 && current[0] === ZERO) {
            throw new Error(
              `${path}: expected decimal ids without leading zeros, got ${Buffer.from(current.subarray(0, currentLength)).toString("latin1")}`,
            );
          }
          count++;
          if (first === "" || !follows(last, lastLength, current, currentLength)) {
            closeRun();
            first = Buffer.from(current.subarray(0, currentLength)).toString("latin1");
          }
          [last, current] = [current, last];
          lastLength = currentLength;
          currentLength = 0;
        }
        if (read === 0) break;
      }
    } finally {
      closeSync(fd);
    }
    if (currentLength > 0) {
      throw new Error(`${path}: the last id has no line end (the file was cut short)`);
    }
    closeRun();
    this.total += count;
    return count;
  }

  /** Counts the ids covered by more than one run (sweeping the sorted firsts and lasts). */
  count(): RunCount {
    const firsts = this.firsts.values().sort();
    const lasts = this.lasts.values().sort();
    let distinct = 0n;
    let covering = 0;
    let from = 0n; // the lowest id not yet added to `distinct` while `covering` > 0
    let example: bigint | undefined;
    let f = 0;
    for (let l = 0; l < lasts.length; ) {
      if (f < firsts.length && firsts[f]! <= lasts[l]!) {
        const id = firsts[f++]!;
        if (covering > 0) {
          distinct += id - from;
          if (example === undefined) example = id;
        }
        from = id;
        covering++;
      } else {
        const id = lasts[l++]!;
        distinct += id - from + 1n;
        from = id + 1n;
        covering--;
      }
    }
    return { total: this.total, duplicates: this.total - Number(distinct), example };
  }
}

/**
 * True when the digits `next` are those of `previous` + 1: the last digit one higher with the
 * same digits before it, after any trailing 9s that became 0s (or 99..9 becoming 100..0).
 */
function follows(
  previous: Uint8Array,
  previousLength: number,
  next: Uint8Array,
  nextLength: number,
): boolean {
  if (nextLength === previousLength + 1) {
    if (next[0] !== ZERO + 1) return false;
    for (let i = 0; i < previousLength; i++) {
      if (previous[i] !== NINE || next[i + 1] !== ZERO) return false;
    }
    return true;
  }
  if (nextLength !== previousLength) return false;
  let i = nextLength - 1;
  while (i >= 0 && previous[i] === NINE && next[i] === ZERO) i--;
  if (i < 0 || next[i] !== previous[i]! + 1) return false;
  for (let j = 0; j < i; j++) if (next[j] !== previous[j]) return false;
  return true;
}

function toId(digits: string): bigint {
  const id = BigInt(digits);
  if (id > MAX_ID) throw new Error(`expected an id below 2^63, got ${digits}`);
  return id;
}
