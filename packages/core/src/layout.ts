// Bit layouts of 64-bit ids: sign bit 0, then time, worker (or shard), sequence, high to low.
// A layout is validated once; composing and decomposing then never produce a negative or
// wrapped id.
import { argumentError, ErrorCodes, LeafError } from "./errors";

/** What defines a layout. */
export interface LayoutOptions {
  /** A short name used in messages ("leaf", "baidu", ...). */
  name?: string;
  /** Bits of time since the epoch, in `unitMillis` units. */
  timestampBits: number;
  /** Bits of worker id (or shard). */
  workerBits: number;
  /** Bits of sequence within one time unit. */
  sequenceBits: number;
  /** Length of one time unit in milliseconds: 1 (ms), 10 (Sonyflake), 1000 (seconds). */
  unitMillis: number;
  /** The layout's zero instant, in milliseconds since the Unix epoch. Must not be in the future. */
  epoch: number;
}

/** The parts of an id. */
export interface IdParts {
  /** Time units since the layout's epoch. */
  ticks: number;
  workerId: number;
  sequence: number;
}

/** An id taken apart, with its time in every form a person or program wants. */
export interface DecodedId extends IdParts {
  id: bigint;
  /** Milliseconds since the Unix epoch (start of the id's time unit). */
  timestampMs: number;
  /** The same instant as a Date. */
  date: Date;
}

/** A validated bit layout. */
export interface Layout extends Readonly<Required<LayoutOptions>> {
  /** Largest worker id (2^workerBits - 1). */
  readonly maxWorkerId: number;
  /** Largest sequence value (2^sequenceBits - 1). */
  readonly maxSequence: number;
  /** Largest tick value (2^timestampBits - 1). */
  readonly maxTicks: number;
  /** The last instant (ms since the Unix epoch) the layout can represent. */
  readonly lastInstantMs: number;
  /** Bit shift of the time field. */
  readonly timestampShift: number;
  /** Bit shift of the worker field. */
  readonly workerShift: number;
  /** Ids per second per worker the layout allows. */
  readonly idsPerSecondPerWorker: number;
  /** timestampBits + workerBits + sequenceBits: the largest id is 2^totalBits - 1. */
  readonly totalBits: number;
  /**
   * True when every id of the layout is at most Number.MAX_SAFE_INTEGER (2^53 - 1), i.e. it has at
   * most 53 bits in all: such ids can be JS numbers (`nextNumber()`) and JSON numbers.
   */
  readonly fitsNumber: boolean;
  /**
   * Time units since the epoch for a wall-clock instant in ms (may be negative or past maxTicks).
   */
  ticksAt(ms: number): number;
  /** Start of a tick as ms since the Unix epoch. */
  msAt(ticks: number): number;
  /** Builds an id; every part is range-checked. */
  compose(parts: IdParts): bigint;
  /** Takes an id apart; accepts a bigint or a decimal string. */
  decompose(id: bigint | string): DecodedId;
}

const COMPONENT = "core";

function layoutError(field: string, value: unknown, expected: string): LeafError {
  return new LeafError({
    component: COMPONENT,
    code: ErrorCodes.INVALID_LAYOUT,
    message: `invalid layout ${field}: ${String(value)}; expected ${expected}`,
    details: { key: field, value, expected },
  });
}

function checkBits(field: string, value: unknown, min: number): number {
  if (typeof value !== "number" || !Number.isInteger(value) || value < min || value > 63) {
    throw layoutError(field, value, `an integer from ${min} to 63`);
  }
  return value;
}

/**
 * Validates a layout and returns it with its derived limits.
 * @param now the current time in ms, to refuse an epoch in the future (defaults to Date.now()).
 */
export function defineLayout(options: LayoutOptions, now: number = Date.now()): Layout {
  const name = options.name ?? "custom";
  const timestampBits = checkBits("timestampBits", options.timestampBits, 1);
  const workerBits = checkBits("workerBits", options.workerBits, 0);
  const sequenceBits = checkBits("sequenceBits", options.sequenceBits, 1);
  const total = timestampBits + workerBits + sequenceBits;
  if (total > 63) {
    throw layoutError(
      "bits",
      `${timestampBits}+${workerBits}+${sequenceBits}=${total}`,
      "at most 63 bits in all, so that the sign bit stays 0",
    );
  }
  const { unitMillis, epoch } = options;
  if (typeof unitMillis !== "number" || !Number.isInteger(unitMillis) || unitMillis < 1) {
    throw layoutError("unitMillis", unitMillis, "a positive whole number of milliseconds");
  }
  if (typeof epoch !== "number" || !Number.isSafeInteger(epoch) || epoch < 0) {
    throw layoutError("epoch", epoch, "milliseconds since 1970-01-01T00:00:00Z, not negative");
  }
  if (epoch > now) {
    throw layoutError(
      "epoch",
      `${epoch} (${new Date(epoch).toISOString()})`,
      `an instant not in the future (now is ${new Date(now).toISOString()})`,
    );
  }
  const maxTicks = 2 ** timestampBits - 1;
  const lastInstantMs = epoch + maxTicks * unitMillis;
  if (!Number.isSafeInteger(lastInstantMs) || lastInstantMs > 8.64e15) {
    throw layoutError(
      "timestampBits",
      timestampBits,
      `fewer bits: with ${unitMillis} ms units the last instant is past the year 275760`,
    );
  }
  const maxWorkerId = 2 ** workerBits - 1;
  const maxSequence = 2 ** sequenceBits - 1;
  const workerShift = sequenceBits;
  const timestampShift = sequenceBits + workerBits;
  const bigTimestampShift = BigInt(timestampShift);
  const bigWorkerShift = BigInt(workerShift);
  const bigSequenceMask = BigInt(maxSequence);
  const bigWorkerMask = BigInt(maxWorkerId);
  const maxId = (1n << BigInt(total)) - 1n;

  const checkPart = (field: string, value: number, max: number) => {
    if (!Number.isInteger(value) || value < 0 || value > max) {
      throw argumentError(COMPONENT, field, value, `an integer from 0 to ${max} (layout ${name})`);
    }
  };

  const layout: Layout = {
    name,
    timestampBits,
    workerBits,
    sequenceBits,
    unitMillis,
    epoch,
    maxWorkerId,
    maxSequence,
    maxTicks,
    lastInstantMs,
    timestampShift,
    workerShift,
    idsPerSecondPerWorker: (maxSequence + 1) * (1000 / unitMillis),
    totalBits: total,
    fitsNumber: total <= 53,
    ticksAt: (ms) => Math.floor((ms - epoch) / unitMillis),
    msAt: (ticks) => epoch + ticks * unitMillis,
    compose({ ticks, workerId, sequence }) {
      checkPart("ticks", ticks, maxTicks);
      checkPart("workerId", workerId, maxWorkerId);
      checkPart("sequence", sequence, maxSequence);
      return (
        (BigInt(ticks) << bigTimestampShift) |
        (BigInt(workerId) << bigWorkerShift) |
        BigInt(sequence)
      );
    },
    decompose(input) {
      const id = parseId(input);
      if (id > maxId) {
        throw new LeafError({
          component: COMPONENT,
          code: ErrorCodes.INVALID_ID,
          message: `id ${id} does not fit layout ${name}: it has more than ${total} bits (largest is ${maxId})`,
          details: { id: id.toString(), layout: name },
        });
      }
      const ticks = Number(id >> bigTimestampShift);
      const timestampMs = epoch + ticks * unitMillis;
      return {
        id,
        ticks,
        workerId: Number((id >> bigWorkerShift) & bigWorkerMask),
        sequence: Number(id & bigSequenceMask),
        timestampMs,
        date: new Date(timestampMs),
      };
    },
  };
  return Object.freeze(layout);
}

const MAX_ID = (1n << 63n) - 1n;
const DECIMAL = /^[0-9]{1,19}$/;

/**
 * Reads an id: a bigint, or a decimal string of digits only, from 0 to 2^63 - 1. A JS number is
 * accepted only when it is a safe integer (ids above 2^53 cannot be held exactly by a number).
 */
export function parseId(value: unknown): bigint {
  let id: bigint | undefined;
  if (typeof value === "bigint") id = value;
  else if (typeof value === "string" && DECIMAL.test(value)) id = BigInt(value);
  else if (typeof value === "number" && Number.isSafeInteger(value)) id = BigInt(value);
  if (id === undefined || id < 0n || id > MAX_ID) {
    const shown =
      typeof value === "string"
        ? JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}...` : value)
        : String(value);
    throw new LeafError({
      component: COMPONENT,
      code: ErrorCodes.INVALID_ID,
      message: `invalid id ${shown}: expected a decimal integer from 0 to ${MAX_ID}`,
      details: { value: typeof value === "bigint" ? value.toString() : value },
    });
  }
  return id;
}

/** Ready-made layouts. Epochs are fixed instants, so ids stay decodable forever. */
export const layouts = {
  /**
   * Java Leaf and Twitter: 41 bits of ms since 2010-11-04T01:42:54.657Z, 10 worker, 12 sequence.
   */
  leaf: defineLayout({
    name: "leaf",
    timestampBits: 41,
    workerBits: 10,
    sequenceBits: 12,
    unitMillis: 1,
    epoch: 1288834974657,
  }),
  /** The redis-sequence layout: 32 bits of seconds since 2020-01-01Z, 12 shard, 19 sequence. */
  redisSequence: defineLayout({
    name: "redis-sequence",
    timestampBits: 32,
    workerBits: 12,
    sequenceBits: 19,
    unitMillis: 1000,
    epoch: Date.UTC(2020, 0, 1),
  }),
  /**
   * Baidu uid-generator: 28 bits of seconds since 2016-05-20Z (ran out on 2024-11), 22 worker, 13
   * sequence.
   */
  baidu: defineLayout({
    name: "baidu",
    timestampBits: 28,
    workerBits: 22,
    sequenceBits: 13,
    unitMillis: 1000,
    epoch: Date.UTC(2016, 4, 20),
  }),
  /** Sonyflake-style: 39 bits of 10 ms since 2014-09-01Z, 16 worker, 8 sequence. */
  sonyflake: defineLayout({
    name: "sonyflake",
    timestampBits: 39,
    workerBits: 16,
    sequenceBits: 8,
    unitMillis: 10,
    epoch: Date.UTC(2014, 8, 1),
  }),
  /**
   * Ids that fit a JS number (at most 2^53 - 1), in milliseconds: 41 bits of ms since 2020-01-01Z
   * (69 years), 4 worker (16 workers), 8 sequence (256 ids per ms per worker).
   */
  safe53ms: defineLayout({
    name: "safe53ms",
    timestampBits: 41,
    workerBits: 4,
    sequenceBits: 8,
    unitMillis: 1,
    epoch: Date.UTC(2020, 0, 1),
  }),
  /**
   * Ids that fit a JS number (at most 2^53 - 1), in seconds: 31 bits of seconds since 2020-01-01Z
   * (68 years), 10 worker (1,024 workers, as Leaf), 12 sequence (4,096 ids per second per worker).
   */
  safe53s: defineLayout({
    name: "safe53s",
    timestampBits: 31,
    workerBits: 10,
    sequenceBits: 12,
    unitMillis: 1000,
    epoch: Date.UTC(2020, 0, 1),
  }),
} as const;

/** Name of a ready-made layout. */
export type LayoutName = keyof typeof layouts;
