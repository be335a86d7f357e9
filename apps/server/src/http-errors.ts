// How failures become HTTP answers: a meaningful status for every error code, Java Leaf's numeric
// code kept in the body, and a message that says what happened and what to do.
import { type ErrorCode, ErrorCodes, isLeafError, LeafError } from "@leaf/core";

/** Codes of conditions that exist only over HTTP, beside @leaf/core's ErrorCodes. */
export const HttpCodes = {
  /** The mode is disabled on this server (Java Leaf answered the id 0 with 200). */
  MODE_DISABLED: "MODE_DISABLED",
  /** No route for this method and path. */
  NOT_FOUND: "NOT_FOUND",
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
  CORRUPT_DATA: 500,
};

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
    return {
      status,
      code: status === 404 ? HttpCodes.NOT_FOUND : HttpCodes.BAD_REQUEST,
      message: `[leaf] [server] bad request: ${cut((error as Error).message, 300)}`,
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
  const shown =
    typeof value === "string"
      ? JSON.stringify(value.length > 80 ? `${value.slice(0, 80)}...` : value)
      : value === undefined
        ? "(missing)"
        : (JSON.stringify(value)?.slice(0, 80) ?? String(value));
  return new LeafError({
    component: "server",
    code: ErrorCodes.INVALID_ARGUMENT,
    message: `invalid ${name}: ${shown}; expected ${expected}`,
    details: { name, expected },
  });
}

function cut(text: string, max: number): string {
  return text.length > max ? `${text.slice(0, max)}...` : text;
}
