// How failures become HTTP answers: a meaningful status for every error code, Java Leaf's numeric
// code kept in the body, and a message that says what happened and what to do.
import { type ErrorCode, ErrorCodes, isLeafError, LeafError } from "@leaf/core";

/** Codes of conditions that exist only over HTTP, beside @leaf/core's ErrorCodes. */
export const HttpCodes = {
  /** The mode is disabled on this server (Java Leaf answered the id 0 with 200). */
  MODE_DISABLED: "MODE_DISABLED",
  /** No route for this method and path. */
  NOT_FOUND: "NOT_FOUND",
  /** The path exists, not with this method (405; `Allow` lists the methods). */
  METHOD_NOT_ALLOWED: "METHOD_NOT_ALLOWED",
  /** An access or admin token is needed and none was given. */
  UNAUTHORIZED: "UNAUTHORIZED",
  /** The token given is not valid for this tag or for the admin API. */
  FORBIDDEN: "FORBIDDEN",
  /** The request body is not what the endpoint reads. */
  BAD_REQUEST: "BAD_REQUEST",
  /** The server is shutting down. */
  SHUTTING_DOWN: "SHUTTING_DOWN",
  /** An unexpected failure (a bug): logged with its stack. */
  INTERNAL: "INTERNAL",
} as const;

/** Every code an error body can carry. */
export type ResponseCode = ErrorCode | (typeof HttpCodes)[keyof typeof HttpCodes];

/** An error raised by the HTTP layer itself (routing, tokens, disabled modes). */
export class HttpError extends Error {
  constructor(
    readonly status: number,
    readonly code: ResponseCode,
    message: string,
    readonly details: Record<string, unknown> = {},
  ) {
    super(message);
    this.name = "HttpError";
  }
}

/** HTTP status of each @leaf/core error code. */
const STATUS: Record<ErrorCode, number> = {
  INVALID_ARGUMENT: 400,
  INVALID_ID: 400,
  INVALID_CONFIG: 500,
  INVALID_LAYOUT: 400,
  UNKNOWN_TAG: 404,
  NOT_INITIALIZED: 503,
  SEGMENTS_EXHAUSTED: 503,
  // Permanent: no range of the tag's step fits below 2^63 - 1, on any node. Not a retry (no
  // Retry-After), and clients do not fail over to another server for it.
  TAG_EXHAUSTED: 410,
  UNAVAILABLE: 503,
  LEASE_LOST: 503,
  CLOCK_BEHIND: 503,
  CLOCK_MOVED_BACKWARDS: 503,
  CLOCK_BEHIND_LEASE: 503,
  CLOCK_SKEW: 503,
  SEQUENCE_EXHAUSTED: 503,
  ALREADY_EXISTS: 409,
  WORKER_IDS_EXHAUSTED: 503,
  WORKER_ID_IN_USE: 503,
  LOCKED: 503,
  CLOSED: 503,
  LAYOUT_EXHAUSTED: 500,
  // A tag refused until an operator fixes its row: unavailable, not a server bug.
  CORRUPT_DATA: 503,
  // The server answers ids as strings and never asks for a JS number: reaching this is a bug.
  UNSAFE_INTEGER: 500,
};

/** fastify's parser says only "not valid JSON", also for the keys it refuses on purpose. */
const INVALID_JSON_MESSAGE =
  "[leaf] [server] bad request: the body is not valid JSON, or it has a key named __proto__ or " +
  "constructor.prototype (refused: they could change the server's objects); send a JSON object, " +
  'e.g. {"tag": "order", "step": 1000}';

/** What an error answer holds, whatever its format. */
export interface ErrorBody {
  status: number;
  code: ResponseCode;
  /** Java Leaf's numeric code (-1 .. -4) where the condition has one. */
  leafCode?: number;
  message: string;
  details?: Record<string, unknown>;
}

/** Turns anything thrown by a handler into the body of an error answer. */
export function toErrorBody(error: unknown): ErrorBody {
  if (error instanceof HttpError) {
    return withDetails(
      { status: error.status, code: error.code, message: error.message },
      error.details,
    );
  }
  if (isLeafError(error)) {
    const body: ErrorBody = {
      status: STATUS[error.code] ?? 500,
      code: error.code,
      message: error.message,
    };
    if (error.leafCode !== undefined) body.leafCode = error.leafCode;
    return withDetails(body, publicDetails(error));
  }
  // Errors fastify raises for malformed requests carry a 4xx statusCode.
  const status = (error as { statusCode?: unknown })?.statusCode;
  if (typeof status === "number" && status >= 400 && status < 500) {
    const fastifyCode = (error as { code?: unknown }).code;
    return {
      status,
      code: status === 404 ? HttpCodes.NOT_FOUND : HttpCodes.BAD_REQUEST,
      message:
        fastifyCode === "FST_ERR_CTP_INVALID_JSON_BODY"
          ? INVALID_JSON_MESSAGE
          : `[leaf] [server] bad request: ${cut((error as Error).message, 300)}`,
    };
  }
  return {
    status: 500,
    code: HttpCodes.INTERNAL,
    message:
      "[leaf] [server] internal error: the failure is logged on the server; please report it",
  };
}

function withDetails(body: ErrorBody, details: Record<string, unknown>): ErrorBody {
  if (Object.keys(details).length > 0) body.details = details;
  return body;
}

/** Details safe to show a caller: plain values only (no causes, no stacks), bigints as strings. */
function publicDetails(error: LeafError): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(error.details)) {
    if (typeof value === "bigint") out[key] = value.toString();
    else if (value === null || ["string", "number", "boolean"].includes(typeof value))
      out[key] = value;
    else if (
      Array.isArray(value) &&
      value.every((v) => typeof v === "string" || typeof v === "number")
    ) {
      out[key] = value;
    }
  }
  return out;
}

/**
 * The plain-text error of Java Leaf's paths: Leaf's `Result{id=-N, status=EXCEPTION}` first (when
 * the condition has a Leaf code), then the code and the message.
 */
export function errorText(body: ErrorBody): string {
  const first =
    body.leafCode !== undefined ? `Result{id=${body.leafCode}, status=EXCEPTION}\n` : "";
  return `${first}${body.code}: ${body.message}\n`;
}

/** A 400 naming the parameter, the value seen and what was expected. */
export function badParameter(name: string, value: unknown, expected: string): LeafError {
  // The name may come from the request (an unknown field of a body): shown cut, like the value.
  const shownName = cut(name, MAX_NAME_SHOWN);
  return new LeafError({
    component: "server",
    code: ErrorCodes.INVALID_ARGUMENT,
    message: `invalid ${shownName}: ${preview(value)}; expected ${expected}`,
    details: { name: shownName, expected },
  });
}

const MAX_NAME_SHOWN = 64;
const MAX_PREVIEW = 80;
/** Levels of arrays and objects a preview opens; deeper ones are shown as [...] or {...}. */
const PREVIEW_DEPTH = 3;
/** Items or fields a preview shows of one array or object. */
const PREVIEW_ITEMS = 4;

/**
 * A short text for a value taken from a request, at most about 80 characters. Its work is bounded
 * whatever the value: a body nested thousands of levels deep, with huge keys or huge strings, is
 * described without walking all of it (JSON.stringify of such a value throws a RangeError).
 */
function preview(value: unknown): string {
  if (value === undefined) return "(missing)";
  const text = previewPart(value, 0);
  return text.length > MAX_PREVIEW ? `${text.slice(0, MAX_PREVIEW)}...` : text;
}

function previewPart(value: unknown, depth: number): string {
  if (typeof value === "string") return JSON.stringify(cut(value, MAX_PREVIEW));
  if (typeof value === "bigint") return value.toString();
  if (typeof value !== "object" || value === null) return String(value);
  if (Array.isArray(value)) {
    if (depth >= PREVIEW_DEPTH) return value.length === 0 ? "[]" : "[...]";
    const items = value.slice(0, PREVIEW_ITEMS).map((item) => previewPart(item, depth + 1));
    if (value.length > PREVIEW_ITEMS) items.push("...");
    return `[${items.join(",")}]`;
  }
  const keys = Object.keys(value);
  if (depth >= PREVIEW_DEPTH) return keys.length === 0 ? "{}" : "{...}";
  const fields = keys
    .slice(0, PREVIEW_ITEMS)
    .map(
      (key) =>
        `${JSON.stringify(cut(key, 20))}:${previewPart((value as Record<string, unknown>)[key], depth + 1)}`,
    );
  if (keys.length > PREVIEW_ITEMS) fields.push("...");
  return `{${fields.join(",")}}`;
}

function cut(text: string, max: number): string {
  return text.length > max ? `${text.slice(0, max)}...` : text;
}
