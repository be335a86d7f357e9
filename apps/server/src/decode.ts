// Taking ids apart: Java Leaf's /decodeSnowflakeId answer (with the configured epoch, not a
// hard-coded one), and the JSON API's decode for every layout, the string form of redis sequence
// ids included. Also used by `leaf decode ID`.
import { type DecodedId, type Layout, layouts, parseId } from "@leaf/core";
import { SequenceIdFormat } from "@leaf/redis-sequence";
import { checkParam, type Param } from "./request-params";

/** Layouts the decode endpoint knows, by name. "snowflake" is the server's configured one. */
export const DECODE_LAYOUTS = [
  "snowflake",
  "leaf",
  "sonyflake",
  "baidu",
  "safe53ms",
  "safe53s",
  "redis-sequence",
] as const;

/** One of {@link DECODE_LAYOUTS}. */
export type DecodeLayoutName = (typeof DECODE_LAYOUTS)[number];

/** The layout a decode name stands for ("snowflake": the server's configured one). */
export function layoutNamed(name: DecodeLayoutName, snowflakeLayout: Layout): Layout {
  if (name === "snowflake") return snowflakeLayout;
  return name === "redis-sequence" ? layouts.redisSequence : layouts[name];
}

/** `yyyy-MM-dd HH:mm:ss.SSS` in the process's time zone, as Java's SimpleDateFormat writes it. */
export function javaDateText(ms: number): string {
  const d = new Date(ms);
  const p = (n: number, w = 2) => String(n).padStart(w, "0");
  return (
    `${p(d.getFullYear(), 4)}-${p(d.getMonth() + 1)}-${p(d.getDate())} ` +
    `${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}.${p(d.getMilliseconds(), 3)}`
  );
}

/**
 * Java Leaf's decode answer: `{"timestamp":"<ms>(yyyy-MM-dd
 * HH:mm:ss.SSS)","workerId":"..","sequenceId":".."}`.
 */
export function javaDecode(
  id: string,
  layout: Layout,
): { timestamp: string; workerId: string; sequenceId: string } {
  const parts = layout.decompose(parseId(id));
  return {
    timestamp: `${parts.timestampMs}(${javaDateText(parts.timestampMs)})`,
    workerId: String(parts.workerId),
    sequenceId: String(parts.sequence),
  };
}

/** The JSON API's decode answer. */
export interface DecodeAnswer {
  id: string;
  layout: string;
  /** ms since 1970 of the id's time unit. */
  timestampMs: number;
  /** The same instant, ISO 8601 in UTC. */
  time: string;
  workerId: number;
  sequence: number;
  /** Redis sequence ids: the shard (same as workerId) and the string form. */
  shard?: number;
  stringForm?: string;
  /** Redis sequence ids: the time zone of the string form's date and time digits. */
  timeZone?: string;
  epoch: number;
  bits: { timestamp: number; worker: number; sequence: number; unitMillis: number };
}

/** Decodes `id` (decimal, or a redis sequence string form) with the named layout. */
export function decodeId(
  id: string,
  layoutName: DecodeLayoutName,
  snowflakeLayout: Layout,
  sequenceFormat: SequenceIdFormat | undefined,
): DecodeAnswer {
  if (layoutName === "redis-sequence") {
    const format = sequenceFormat ?? new SequenceIdFormat({ layout: layouts.redisSequence });
    const parsed = format.parse(id);
    const layout = layouts.redisSequence;
    return {
      id: parsed.id.toString(),
      layout: layout.name,
      timestampMs: parsed.timestampMs,
      time: parsed.date.toISOString(),
      workerId: parsed.shard,
      sequence: parsed.sequence,
      shard: parsed.shard,
      stringForm: format.format(parsed.id, parsed.prefix ?? ""),
      timeZone: format.timeZone,
      epoch: layout.epoch,
      bits: bits(layout),
    };
  }
  const layout = layoutNamed(layoutName, snowflakeLayout);
  const parts: DecodedId = layout.decompose(parseId(id));
  return {
    id: parts.id.toString(),
    layout: layout.name,
    timestampMs: parts.timestampMs,
    time: parts.date.toISOString(),
    workerId: parts.workerId,
    sequence: parts.sequence,
    epoch: layout.epoch,
    bits: bits(layout),
  };
}

function bits(layout: Layout) {
  return {
    timestamp: layout.timestampBits,
    worker: layout.workerBits,
    sequence: layout.sequenceBits,
    unitMillis: layout.unitMillis,
  };
}

/** Reads a `layout` parameter. */
export function readLayoutName(raw: string | undefined): DecodeLayoutName {
  return (checkParam(layoutParam, raw) ?? "snowflake") as DecodeLayoutName;
}

/** `layout` of the JSON API's decode route. */
export const layoutParam: Param = {
  name: "layout",
  in: "query",
  description:
    "snowflake (this server's configured layout, default), leaf, sonyflake, baidu, safe53ms, safe53s, redis-sequence.",
  schema: { type: "string", enum: DECODE_LAYOUTS },
  expected: `one of ${DECODE_LAYOUTS.join(", ")} ("snowflake" is this server's configured layout)`,
};

/** A description of a layout for `/api/v1/layouts`. */
export function describeLayout(name: string, layout: Layout) {
  return {
    name,
    layout: layout.name,
    epoch: layout.epoch,
    epochTime: new Date(layout.epoch).toISOString(),
    bits: bits(layout),
    maxWorkerId: layout.maxWorkerId,
    maxSequence: layout.maxSequence,
    lastInstant: new Date(layout.lastInstantMs).toISOString(),
    idsPerSecondPerWorker: layout.idsPerSecondPerWorker,
  };
}
