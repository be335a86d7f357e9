// How each configuration value is read: from a string (.properties, the environment) or a
// JSON/YAML value, to the type the loader uses, or an Expected saying what was expected.
import { availableParallelism } from "node:os";

/**
 * Thrown by a key's reader: what was expected (the loader adds the key, the source and the value).
 */
export class Expected extends Error {
  constructor(readonly expected: string) {
    super(expected);
  }
}

/** True when `text` holds a C0 or C1 control character (tab, newline, NUL, DEL, ...). */
export function hasControlCharacters(text: string): boolean {
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c < 0x20 || (c >= 0x7f && c <= 0x9f)) return true;
  }
  return false;
}

/** A string value trimmed; undefined for any other value. */
export function text(raw: unknown): string | undefined {
  if (typeof raw === "string") return raw.trim();
  return undefined;
}

/** Reads an integer from min to max (a JSON number or a decimal string, "_" and "," allowed). */
export function integer(min: number, max: number) {
  const expected = `an integer from ${min.toLocaleString("en-US")} to ${max.toLocaleString("en-US")}`;
  return (raw: unknown): number => {
    let value: number | undefined;
    if (typeof raw === "number") value = raw;
    const t = text(raw);
    if (t !== undefined && /^-?[0-9][0-9_,]*$/.test(t)) value = Number(t.replace(/[_,]/g, ""));
    if (value === undefined || !Number.isSafeInteger(value) || value < min || value > max) {
      throw new Expected(expected);
    }
    return value;
  };
}

/** Reads true/false (also yes/no, on/off, 1/0). */
export function boolean(raw: unknown): boolean {
  if (typeof raw === "boolean") return raw;
  const t = text(raw)?.toLowerCase();
  if (t === "true" || t === "yes" || t === "on" || t === "1") return true;
  if (t === "false" || t === "no" || t === "off" || t === "0") return false;
  throw new Expected("true or false");
}

/** Reads one of `values`. */
export function oneOf<T extends string>(values: readonly T[]) {
  return (raw: unknown): T => {
    const t = text(raw);
    if (t !== undefined && (values as readonly string[]).includes(t)) return t as T;
    throw new Expected(`one of ${values.join(", ")}`);
  };
}

/** Reads a trimmed non-empty string of up to `max` characters without control characters. */
export function nonEmpty(what: string, max = 4096) {
  return (raw: unknown): string => {
    const t = text(raw);
    if (t === undefined || t === "" || t.length > max || hasControlCharacters(t)) {
      throw new Expected(`${what} (1 to ${max} characters, no control characters)`);
    }
    return t;
  };
}

/** A string that may be empty (a password): kept as written, not trimmed. */
export function anyText(raw: unknown): string {
  if (typeof raw === "string") return raw;
  if (typeof raw === "number") return String(raw);
  throw new Expected("a string (may be empty)");
}

const SERVICE_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;
const HOST =
  /^(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*|\[?[0-9A-Fa-f:.]+\]?)$/;
const TABLE = /^[A-Za-z_][A-Za-z0-9_$]{0,63}(?:\.[A-Za-z_][A-Za-z0-9_$]{0,63})?$/;

/** Reads a host name or IP address (brackets around an IPv6 address removed). */
export function host(raw: unknown): string {
  const t = text(raw);
  if (t === undefined || t.length > 253 || !HOST.test(t)) {
    throw new Expected("a host name or IP address such as 127.0.0.1, 0.0.0.0 or ::");
  }
  return t.replace(/^\[|\]$/g, "");
}

/** Reads a redis:// or rediss:// URL with a host, a valid port and an optional db number. */
export function redisUrl(raw: unknown): string {
  const t = text(raw);
  let ok = false;
  if (t !== undefined) {
    try {
      const url = new URL(t);
      const port = url.port === "" ? 6379 : Number(url.port);
      ok =
        (url.protocol === "redis:" || url.protocol === "rediss:") &&
        url.hostname !== "" &&
        port >= 1 &&
        port <= 65535 &&
        /^\/?(?:\d{1,2})?$/.test(url.pathname);
    } catch {
      ok = false;
    }
  }
  if (!ok)
    throw new Expected("a Redis URL: redis://[user:password@]host:6379[/db] or rediss://...");
  return t!;
}

/** Reads a table name, optionally database.table. */
export function table(raw: unknown): string {
  const t = text(raw);
  if (t === undefined || !TABLE.test(t)) {
    throw new Expected("a table name (letters, digits, _ and $; optionally database.table)");
  }
  return t;
}

/** Most worker processes `server.workers` accepts. */
export const MAX_WORKERS = 64;

/**
 * Reads server.workers: an integer from 1 to {@link MAX_WORKERS}, or "auto" for the number of
 * cores this machine offers the process (os.availableParallelism(), at most MAX_WORKERS).
 */
export function workerCount(raw: unknown): number {
  const t = text(raw);
  if (t === "auto") return Math.min(Math.max(availableParallelism(), 1), MAX_WORKERS);
  if (typeof raw === "number" || (t !== undefined && /^[0-9]{1,3}$/.test(t))) {
    const n = Number(raw);
    if (Number.isSafeInteger(n) && n >= 1 && n <= MAX_WORKERS) return n;
  }
  throw new Expected(`an integer from 1 to ${MAX_WORKERS}, or auto (the number of cores)`);
}

/** Worker ids, one per worker process: a list, or written "5,6" (commas or spaces). */
export function workerIdList(raw: unknown): number[] {
  const expected = "worker ids (integers from 0 to 4,194,303), one per worker process: 5,6";
  const list = Array.isArray(raw)
    ? raw
    : typeof raw === "number"
      ? [raw]
      : typeof raw === "string"
        ? raw.split(/[\s,]+/).filter((t) => t !== "")
        : undefined;
  if (list === undefined || list.length === 0) throw new Expected(expected);
  return list.map((item) => {
    const n =
      typeof item === "number"
        ? item
        : typeof item === "string" && /^[0-9]+$/.test(item.trim())
          ? Number(item)
          : Number.NaN;
    if (!Number.isSafeInteger(n) || n < 0 || n > 4_194_303) throw new Expected(expected);
    return n;
  });
}

/** Reads JSON: an object as such from JSON/YAML, or text parsed as JSON; `what` names the shape. */
export function json(what: string) {
  return (raw: unknown): unknown => {
    if (typeof raw === "object" && raw !== null) return raw;
    const t = text(raw);
    if (t !== undefined) {
      try {
        return JSON.parse(t);
      } catch {
        // falls through to the error below
      }
    }
    throw new Expected(what);
  };
}

/** `{"tag": "token"}` or `{"tag": ["t1", "t2"]}`, "*" for every tag not listed. */
export function accessTokens(raw: unknown): Map<string, string[]> {
  const expected =
    'a JSON object of tag to token(s): {"order": "s3cret-token-1", "*": ["token-a", "token-b"]}; tokens of at least 8 characters';
  const data = json(expected)(raw);
  if (typeof data !== "object" || data === null || Array.isArray(data))
    throw new Expected(expected);
  const tokens = new Map<string, string[]>();
  for (const [tag, value] of Object.entries(data as Record<string, unknown>)) {
    const list = Array.isArray(value) ? value : [value];
    if (
      tag === "" ||
      tag.length > 128 ||
      list.length === 0 ||
      !list.every(
        (t) =>
          typeof t === "string" &&
          t.length >= 8 &&
          t.length <= 512 &&
          !/\s/.test(t) &&
          !hasControlCharacters(t),
      )
    ) {
      throw new Expected(expected);
    }
    tokens.set(tag, list as string[]);
  }
  if (tokens.size === 0) throw new Expected(expected);
  return tokens;
}

/** Reads the admin token: 16 to 512 characters without spaces. */
export function adminToken(raw: unknown): string {
  const t = text(raw);
  if (
    t === undefined ||
    t.length < 16 ||
    t.length > 512 ||
    /\s/.test(t) ||
    hasControlCharacters(t)
  ) {
    throw new Expected(
      "a token of 16 to 512 characters without spaces (e.g. from `openssl rand -hex 24`)",
    );
  }
  return t;
}

/** Reads a tag, or "" for none. */
export function tagOrEmpty(raw: unknown): string {
  const t = text(raw);
  if (t === undefined || t.length > 128 || hasControlCharacters(t)) {
    throw new Expected('a tag of up to 128 characters, or "" for none');
  }
  return t;
}

/** Tags, as a list or comma-separated; each 1 to 128 characters without control characters. */
export function tagList(raw: unknown): string[] {
  const expected = "tags of 1 to 128 characters without control characters, comma-separated";
  const list = Array.isArray(raw) ? raw : typeof raw === "string" ? raw.split(",") : undefined;
  if (list === undefined) throw new Expected(expected);
  const tags = list.map((t) => (typeof t === "string" ? t.trim() : t)).filter((t) => t !== "");
  for (const t of tags) {
    if (typeof t !== "string" || t.length > 128 || hasControlCharacters(t)) {
      throw new Expected(expected);
    }
  }
  return tags as string[];
}

/** Reads a time zone name or offset (checked further by the sequence's id format). */
export function timeZone(raw: unknown): string {
  const t = text(raw);
  if (t === undefined || t === "" || t.length > 64) {
    throw new Expected('"UTC", a fixed offset like "+08:00", or an IANA zone like "Asia/Shanghai"');
  }
  return t;
}

/** Reads the string form's prefix: up to 64 characters, no spaces, kept as written. */
export function prefix(raw: unknown): string {
  if (typeof raw !== "string" || raw.length > 64 || /\s/.test(raw) || hasControlCharacters(raw)) {
    throw new Expected("up to 64 characters without spaces or control characters");
  }
  return raw;
}

/** Reads the service name: letters, digits, ".", "_" and "-". */
export function serviceName(raw: unknown): string {
  const t = text(raw);
  if (t === undefined || !SERVICE_NAME.test(t)) {
    throw new Expected(
      "1 to 128 letters, digits, '.', '_' or '-', starting with a letter or digit",
    );
  }
  return t;
}

/** Pino's levels. */
export const LOG_LEVELS = ["fatal", "error", "warn", "info", "debug", "trace", "silent"] as const;
