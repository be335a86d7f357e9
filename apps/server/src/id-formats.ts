// The string forms the JSON API answers in (`format=` and `prefix=` on the segment and snowflake id
// routes and on decode): decimal (the default), fixed-width base62 / base36 / Crockford base32, and
// CosId's friendly form for snowflake ids. The encodings themselves are @leaf/core's.
import {
  FriendlyIdFormat,
  type IdAlphabet,
  IdEncoding,
  type IdStringForm,
  isLeafError,
  type Layout,
} from "@leaf/core";
import { type DecodeLayoutName, layoutNamed } from "./decode";
import { badParameter } from "./http-errors";
import { checkParam, type Param, type Query, single } from "./request-params";

/** Values of `format` on the segment and snowflake routes. */
export const ID_FORMATS = ["decimal", "base62", "base36", "base32", "friendly"] as const;

/** One of {@link ID_FORMATS}. */
export type IdFormatName = (typeof ID_FORMATS)[number];

/** What `format` selects, for messages and the docs. */
export const ID_FORMATS_TEXT =
  '"decimal" (default), "base62", "base36", "base32" (Crockford) or "friendly" (snowflake ids only: yyyyMMddHHmmssSSS-worker-sequence, UTC)';

/** `format` of the segment and snowflake id routes. */
export const idFormatParam: Param = {
  name: "format",
  in: "query",
  description:
    "The string form of the ids: `decimal` (default); `base62`, `base36`, `base32` (Crockford): fixed width (segment ids: that of 63 bits; snowflake ids: that of the configured layout), sorting as the ids do; `friendly` (snowflake ids only): yyyyMMddHHmmssSSS-worker-sequence, UTC. The answer then has `format`.",
  schema: { type: "string", enum: ID_FORMATS },
  expected: ID_FORMATS_TEXT,
};

/** `prefix` of those routes (checked by the form that writes it, see makeForm). */
export const idPrefixParam: Param = {
  name: "prefix",
  in: "query",
  description:
    "Written before every id (e.g. `ord_`), with a format other than decimal: up to 32 letters, digits, `_`, `-`, `.` or `:`.",
  schema: { type: "string", maxLength: 32, pattern: "^[A-Za-z0-9_.:-]*$" },
};

/** The ids a route gives: segment ids take any 63-bit value, snowflake ids follow the layout. */
export type IdKind = { kind: "segment" } | { kind: "snowflake"; layout: Layout };

/** Segment ids. */
export const SEGMENT_IDS: IdKind = { kind: "segment" };

/** Forms without a prefix, made once per alphabet and width. */
const shared = new Map<string, IdStringForm>();

/**
 * The form `format` and `prefix` ask for; undefined for decimal, the default (and then `prefix` is
 * refused). A bad value is a 400 naming the parameter.
 */
export function readIdForm(query: Query, ids: IdKind): IdStringForm | undefined {
  const raw = single(query, "format");
  const prefix = single(query, "prefix");
  const name = checkParam(idFormatParam, raw) ?? "decimal";
  if (name === "decimal") {
    if (prefix !== undefined) {
      throw badParameter(
        "prefix",
        prefix,
        `no prefix with format=decimal (add format=base62, base36, base32 or friendly)`,
      );
    }
    return undefined;
  }
  if (name === "friendly" && ids.kind !== "snowflake") {
    throw badParameter(
      "format",
      raw,
      '"decimal", "base62", "base36" or "base32": "friendly" writes the time, worker and sequence of snowflake ids',
    );
  }
  const bits = ids.kind === "snowflake" ? ids.layout.totalBits : 63;
  const key = `${name}:${bits}:${ids.kind === "snowflake" ? ids.layout.name : ""}`;
  if (prefix === undefined) {
    let form = shared.get(key);
    if (form === undefined) {
      form = makeForm(name as Exclude<IdFormatName, "decimal">, bits, ids, undefined);
      shared.set(key, form);
    }
    return form;
  }
  return makeForm(name as Exclude<IdFormatName, "decimal">, bits, ids, prefix);
}

function makeForm(
  name: Exclude<IdFormatName, "decimal">,
  bits: number,
  ids: IdKind,
  prefix: string | undefined,
): IdStringForm {
  try {
    return name === "friendly"
      ? new FriendlyIdFormat({ layout: (ids as { layout: Layout }).layout, prefix })
      : new IdEncoding({ alphabet: name as IdAlphabet, bits, prefix });
  } catch (error) {
    if (isLeafError(error) && error.details.name === "prefix") {
      throw badParameter(
        "prefix",
        prefix,
        "up to 32 characters, each a letter, a digit, _, -, . or :",
      );
    }
    throw error;
  }
}

/** `,"format":"base62"` for a string form, nothing for decimal (answers stay as they were). */
export function formatField(form: IdStringForm | undefined): string {
  return form === undefined ? "" : `,"format":"${form.name}"`;
}

/** One id as a JSON string in `form` (decimal when undefined). */
export function jsonId(id: bigint, form: IdStringForm | undefined): string {
  // Every form writes only letters, digits and the prefix's _ - . : characters: no JSON escaping.
  return `"${form === undefined ? id : form.encode(id)}"`;
}

/** Ids as a JSON array of strings in `form`. */
export function jsonIdsIn(ids: bigint[], form: IdStringForm): string {
  if (ids.length === 0) return "[]";
  let out = `["${form.encode(ids[0]!)}"`;
  for (let i = 1; i < ids.length; i++) out += `,"${form.encode(ids[i]!)}"`;
  return `${out}]`;
}

/**
 * The id to decode as decimal text: `text` read in the form `format` and `prefix` name, with the
 * widths of the layout it is decoded with (the redis sequence has its own string form and takes no
 * `format`). A string that is not in the form is a 400 (INVALID_ID) saying what is wrong with it.
 */
export function decodeInput(
  text: string,
  query: Query,
  layoutName: DecodeLayoutName,
  snowflakeLayout: Layout,
): string {
  if (layoutName === "redis-sequence") {
    const format = single(query, "format");
    const prefix = single(query, "prefix");
    if (format !== undefined || prefix !== undefined) {
      throw badParameter(
        format !== undefined ? "format" : "prefix",
        format ?? prefix,
        "no format or prefix with layout=redis-sequence (its string form is read as it is)",
      );
    }
    return text;
  }
  const form = readIdForm(query, {
    kind: "snowflake",
    layout: layoutNamed(layoutName, snowflakeLayout),
  });
  return form === undefined ? text : form.parse(text).toString();
}
