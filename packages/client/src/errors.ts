// The client's one error class: a stable string code, Java Leaf's numeric code where the server
// gave one, and the server that answered. No dependency on @leaf/core: the client has none at all.

/**
 * Codes of {@link LeafClientError}. Server codes (UNKNOWN_TAG, ...) pass through as the server sent
 * them.
 */
export const ClientErrorCodes = {
  /** An option or argument is not valid (the message names it). */
  INVALID_ARGUMENT: "INVALID_ARGUMENT",
  /** `nextIdSync()` found the local cache empty: call `nextId()`, which waits for a range. */
  CACHE_EMPTY: "CACHE_EMPTY",
  /**
   * No server could answer before the deadline (every one failed, timed out or had its breaker
   * open).
   */
  UNAVAILABLE: "UNAVAILABLE",
  /** The call's deadline (`timeoutMs`) passed. */
  TIMEOUT: "TIMEOUT",
  /** The caller's AbortSignal fired. */
  ABORTED: "ABORTED",
  /** The client (or this segment/snowflake source) is closed. */
  CLOSED: "CLOSED",
  /** A server answered 200 with a body that is not what the API documents. */
  BAD_RESPONSE: "BAD_RESPONSE",
} as const;

/** What a {@link LeafClientError} carries besides its message. */
export interface LeafClientErrorOptions {
  code: string;
  message: string;
  /**
   * Java Leaf's code when the server gave one: segment -1 not initialized, -2 unknown tag, -3 both
   * segments used up; snowflake -1 clock behind, -3 clock moved back, -4 lease lost.
   */
  leafCode?: number;
  /** HTTP status of the server's answer. */
  status?: number;
  /** The server (base URL) that answered, or that the failure concerns. */
  server?: string;
  /** For UNAVAILABLE and TIMEOUT: the last failure of each server tried, oldest first. */
  attempts?: LeafClientError[];
  cause?: unknown;
}

/** Every error the client throws. `code` is stable; `message` reads `[leaf] [client] ...`. */
export class LeafClientError extends Error {
  readonly code: string;
  readonly leafCode: number | undefined;
  readonly status: number | undefined;
  readonly server: string | undefined;
  readonly attempts: LeafClientError[];

  constructor(options: LeafClientErrorOptions) {
    super(`[leaf] [client] ${options.message}`, { cause: options.cause });
    this.name = "LeafClientError";
    this.code = options.code;
    this.leafCode = options.leafCode;
    this.status = options.status;
    this.server = options.server;
    this.attempts = options.attempts ?? [];
  }
}

/** True when `error` is a {@link LeafClientError} (with `code`, when given). */
export function isLeafClientError(error: unknown, code?: string): error is LeafClientError {
  return error instanceof LeafClientError && (code === undefined || error.code === code);
}

/** INVALID_ARGUMENT naming the option, the value seen and what was expected. */
export function invalidArgument(name: string, value: unknown, expected: string): LeafClientError {
  return new LeafClientError({
    code: ClientErrorCodes.INVALID_ARGUMENT,
    message: `invalid ${name}: ${shown(value)}; expected ${expected}`,
  });
}

function shown(value: unknown): string {
  if (value === undefined) return "(missing)";
  if (typeof value === "string")
    return JSON.stringify(value.length > 80 ? `${value.slice(0, 80)}...` : value);
  if (typeof value === "bigint") return `${value}n`;
  if (typeof value === "function") return "a function";
  if (typeof value === "object" && value !== null) {
    try {
      const text = JSON.stringify(value);
      return text.length > 80 ? `${text.slice(0, 80)}...` : text;
    } catch {
      return "an object";
    }
  }
  return String(value);
}
