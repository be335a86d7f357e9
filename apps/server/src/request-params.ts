// Reads request parameters strictly: each has one accepted shape, and anything else is a 400 naming
// the parameter, the value seen and what is expected. Repeated parameters are refused, not guessed.
import { isValidTag, MAX_TAG_LENGTH } from "@leaf/segment";
import { hasControlCharacters } from "./config-keys";
import { badParameter } from "./http-errors";

/** A query string as fastify parses it: a value is a string, or an array when repeated. */
export type Query = Record<string, string | string[] | undefined>;

/** The single value of a query parameter; a repeated one is refused. */
export function single(query: Query, name: string): string | undefined {
  const value = query[name];
  if (Array.isArray(value)) {
    throw badParameter(
      name,
      value.join("&"),
      `${name} given once (it was given ${value.length} times)`,
    );
  }
  return value;
}

const DIGITS = /^[0-9]{1,9}$/;

/** `count`: 1 to `max`, digits only. */
export function readCount(query: Query, max: number): number | undefined {
  const raw = single(query, "count");
  if (raw === undefined) return undefined;
  const value = DIGITS.test(raw) ? Number(raw) : Number.NaN;
  if (!(value >= 1 && value <= max)) {
    throw badParameter(
      "count",
      raw,
      `an integer from 1 to ${max.toLocaleString("en-US")} (server.maxBatch)`,
    );
  }
  return value;
}

/** `shard` of the redis sequence: 0 to `max` (default 0). */
export function readShard(query: Query, max: number): number {
  const raw = single(query, "shard");
  if (raw === undefined) return 0;
  const value = DIGITS.test(raw) ? Number(raw) : Number.NaN;
  if (!(value >= 0 && value <= max)) {
    throw badParameter("shard", raw, `an integer from 0 to ${max} (the layout's shard bits)`);
  }
  return value;
}

/** `format` of a redis sequence id: long (default) or string. */
export function readFormat(query: Query): "long" | "string" {
  const raw = single(query, "format");
  if (raw === undefined || raw === "long") return "long";
  if (raw === "string") return "string";
  throw badParameter(
    "format",
    raw,
    '"long" (the 64-bit id as a decimal string) or "string" (prefix + yyyyMMddHHmmss + sequence + shard)',
  );
}

/** `prefix` of the string form: up to 64 characters, no spaces or control characters. */
export function readPrefix(query: Query, fallback: string): string {
  const raw = single(query, "prefix");
  if (raw === undefined) return fallback;
  if (raw.length > 64 || /\s/.test(raw) || hasControlCharacters(raw)) {
    throw badParameter("prefix", raw, "up to 64 characters without spaces or control characters");
  }
  return raw;
}

/** A segment tag or snowflake key from the path: 1 to 128 characters, no control characters. */
export function readTag(value: unknown, name = "tag"): string {
  if (typeof value !== "string" || !isValidTag(value)) {
    throw badParameter(name, value, `1 to ${MAX_TAG_LENGTH} characters without control characters`);
  }
  return value;
}
