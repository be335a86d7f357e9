// Each request parameter is declared once, as a Param: its name, where it is, its JSON schema and
// what a valid value is. The routes read it with readParam (a value outside the schema is a 400
// naming the parameter, the value seen and what is expected; a repeated parameter is refused, not
// guessed), route-rules.ts refuses the query parameters a route does not declare, and openapi.ts
// writes the declarations into the document.
import { isValidTag, MAX_TAG_LENGTH } from "@leaf/segment";
import { hasControlCharacters } from "./config-keys";
import { badParameter } from "./http-errors";

/** A query string as fastify parses it: a value is a string, or an array when repeated. */
export type Query = Record<string, string | string[] | undefined>;

/** One request parameter: checked by readParam, listed in the OpenAPI document as it is. */
export interface Param {
  name: string;
  in: "query" | "path";
  required?: boolean;
  description?: string;
  /**
   * The accepted values. An integer is digits only, from `minimum` to `maximum` (or the limit the
   * route reads it with); a string is one of `enum`, at most `maxLength` long, matching `pattern`.
   */
  schema: {
    type?: string;
    minimum?: number;
    maximum?: number;
    maxLength?: number;
    pattern?: string;
    enum?: readonly string[];
  } & Record<string, unknown>;
  /** What a valid value is, for the 400 (given the route's limit when it has one). */
  expected?: string | ((limit: number) => string);
  /** A check beyond the schema. */
  check?: (raw: string) => boolean;
}

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

const DIGITS = /^[0-9]{1,10}$/;

/** The schemas' patterns, compiled once. */
const PATTERNS = new Map<string, RegExp>();

function pattern(source: string): RegExp {
  let compiled = PATTERNS.get(source);
  if (compiled === undefined) {
    compiled = new RegExp(source);
    PATTERNS.set(source, compiled);
  }
  return compiled;
}

function fits(param: Param, raw: string, limit: number | undefined): boolean {
  const { schema } = param;
  if (schema.type === "integer") {
    const value = DIGITS.test(raw) ? Number(raw) : Number.NaN;
    if (!(value >= (schema.minimum ?? 0) && value <= (limit ?? schema.maximum ?? Infinity))) {
      return false;
    }
  }
  if (schema.enum && !schema.enum.includes(raw)) return false;
  if (schema.maxLength !== undefined && raw.length > schema.maxLength) return false;
  if (schema.pattern !== undefined && !pattern(schema.pattern).test(raw)) return false;
  return param.check === undefined || param.check(raw);
}

/** The 400 of a value `param` does not accept. */
export function refused(param: Param, raw: unknown, limit?: number) {
  const { expected } = param;
  const text =
    typeof expected === "function" ? expected(limit ?? param.schema.maximum ?? 0) : expected;
  return badParameter(param.name, raw, text ?? "a value the OpenAPI document allows");
}

/**
 * The value of a query parameter, checked against its declaration (`limit`: the route's upper
 * bound of an integer); undefined when it is absent and not required.
 */
export function readParam(query: Query, param: Param, limit?: number): string | undefined {
  return checkParam(param, single(query, param.name), limit);
}

/** `raw` checked against the declaration of `param` (see readParam). */
export function checkParam(param: Param, raw: string | undefined, limit?: number) {
  if (raw === undefined) {
    if (param.required) throw refused(param, raw, limit);
    return undefined;
  }
  if (!fits(param, raw, limit)) throw refused(param, raw, limit);
  return raw;
}

/** An integer query parameter, checked (see readParam). */
export function readInteger(query: Query, param: Param, limit?: number): number | undefined {
  const raw = readParam(query, param, limit);
  return raw === undefined ? undefined : Number(raw);
}

/** A segment tag or snowflake key from the path: 1 to 128 characters, no control characters. */
export function readTag(value: unknown, name = "tag"): string {
  if (typeof value !== "string" || !isValidTag(value)) {
    throw badParameter(name, value, `1 to ${MAX_TAG_LENGTH} characters without control characters`);
  }
  return value;
}

// ---- The parameters --------------------------------------------------------------------------

/** Largest range a caller may ask for: the `int` step column's maximum, as the generator's. */
export const MAX_RANGE = 2_147_483_647;

/** A segment tag in the path (read with readTag). */
export const tagParam = (name: string): Param => ({
  name,
  in: "path",
  required: true,
  description: "Segment tag (`biz_tag`): 1 to 128 characters, no control characters.",
  schema: { type: "string", minLength: 1, maxLength: 128 },
});

/** `count` of the id routes: 1 to server.maxBatch, the limit it is read with. */
export const countParam: Param = {
  name: "count",
  in: "query",
  description: "How many ids, 1 to server.maxBatch (default 10,000).",
  schema: { type: "integer", minimum: 1 },
  expected: (max) => `an integer from 1 to ${max.toLocaleString("en-US")} (server.maxBatch)`,
};

/** `count` of the range route (required). */
export const rangeCountParam: Param = {
  name: "count",
  in: "query",
  required: true,
  description: "The most ids the range may hold, 1 to 2,147,483,647.",
  schema: { type: "integer", minimum: 1, maximum: MAX_RANGE },
  expected: `an integer from 1 to ${MAX_RANGE.toLocaleString("en-US")}: the most ids the range may hold`,
};

/** `token`: read by AccessTokens. */
export const tokenParam: Param = {
  name: "token",
  in: "query",
  description:
    "Access token, when the tag has tokens (also `Authorization: Bearer` or `X-Leaf-Token`).",
  schema: { type: "string" },
};

/** `key` of the JSON API's snowflake routes (read with readTag). */
export const keyParam: Param = {
  name: "key",
  in: "query",
  description: "Only selects the access token.",
  schema: { type: "string" },
};

/** `shard` of the redis sequence: 0 to the layout's largest, the limit it is read with. */
export const shardParam: Param = {
  name: "shard",
  in: "query",
  description: "Shard, 0 to the layout's largest (4095 by default); default 0.",
  schema: { type: "integer", minimum: 0 },
  expected: (max) => `an integer from 0 to ${max} (the layout's shard bits)`,
};

/** `format` of a redis sequence id. */
export const sequenceFormatParam: Param = {
  name: "format",
  in: "query",
  description:
    "`long`: the 64-bit id as a decimal string (default); `string`: prefix + yyyyMMddHHmmss + 6-digit sequence + 4-digit shard.",
  schema: { type: "string", enum: ["long", "string"] },
  expected:
    '"long" (the 64-bit id as a decimal string) or "string" (prefix + yyyyMMddHHmmss + sequence + shard)',
};

/** `prefix` of the redis sequence's string form. */
export const sequencePrefixParam: Param = {
  name: "prefix",
  in: "query",
  description:
    "Prefix of the string form (format=string only), up to 64 characters without spaces.",
  schema: { type: "string", maxLength: 64 },
  expected: "up to 64 characters without spaces or control characters",
  check: (raw) => !/\s/.test(raw) && !hasControlCharacters(raw),
};

/** `snowflakeId` of Java Leaf's decode path (required). */
export const snowflakeIdParam: Param = {
  name: "snowflakeId",
  in: "query",
  required: true,
  schema: { $ref: "#/components/schemas/Id" },
  expected: "a snowflake id: a decimal integer from 0 to 9223372036854775807, in the query string",
};

/** `mode` of the readiness check. */
export const modeParam: Param = {
  name: "mode",
  in: "query",
  description: "Check one mode only.",
  schema: { type: "string", enum: ["segment", "snowflake", "redisSequence"] },
  expected: "one of segment, snowflake, redisSequence",
};
