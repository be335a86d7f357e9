// Tokens on the id endpoints (per tag, as tinyid) and on the admin API. Compared in constant time
// over their SHA-256 digests, so neither the token nor its length leaks through timing.
import { createHash, timingSafeEqual } from "node:crypto";
import type { FastifyRequest } from "fastify";
import { HttpCodes, HttpError } from "./http-errors";
import type { Query } from "./request-params";

function digest(token: string): Buffer {
  return createHash("sha256").update(token).digest();
}

/** The token a request carries: `Authorization: Bearer T`, `X-Leaf-Token: T`, or `?token=T`. */
export function requestToken(request: FastifyRequest): string | undefined {
  const auth = request.headers.authorization;
  if (typeof auth === "string") {
    const match = /^Bearer\s+(\S+)\s*$/i.exec(auth);
    if (match) return match[1];
  }
  const header = request.headers["x-leaf-token"];
  if (typeof header === "string" && header !== "") return header;
  const query = (request.query as Query)?.token;
  if (Array.isArray(query)) {
    // Refused without showing the values: a token is never echoed back.
    throw new HttpError(
      400,
      HttpCodes.BAD_REQUEST,
      `[leaf] [server] invalid token: given ${query.length} times (values not shown); send the access token once`,
    );
  }
  return query;
}

/** Checks tokens of the id endpoints: a tag listed needs one of its tokens; "*" covers the rest. */
export class AccessTokens {
  private readonly byTag = new Map<string, Buffer[]>();

  constructor(tokens: Map<string, string[]>) {
    for (const [tag, list] of tokens) this.byTag.set(tag, list.map(digest));
  }

  /** Throws 401 without a token and 403 with a wrong one, when `scope` needs a token. */
  check(request: FastifyRequest, scope: string, what: string): void {
    const allowed = this.byTag.get(scope) ?? this.byTag.get("*");
    if (allowed === undefined) return;
    const token = requestToken(request);
    if (token === undefined) {
      throw new HttpError(
        401,
        HttpCodes.UNAUTHORIZED,
        `[leaf] [server] ${what} needs an access token: send it as ?token=..., Authorization: Bearer ... or X-Leaf-Token`,
      );
    }
    const given = digest(token);
    if (!allowed.some((d) => timingSafeEqual(d, given))) {
      throw new HttpError(
        403,
        HttpCodes.FORBIDDEN,
        `[leaf] [server] the access token is not valid for ${what}`,
      );
    }
  }
}

/** Checks the admin API's bearer token. */
export class AdminToken {
  private readonly expected: Buffer;

  constructor(token: string) {
    this.expected = digest(token);
  }

  check(request: FastifyRequest): void {
    const auth = request.headers.authorization;
    const match = typeof auth === "string" ? /^Bearer\s+(\S+)\s*$/i.exec(auth) : null;
    if (!match) {
      throw new HttpError(
        401,
        HttpCodes.UNAUTHORIZED,
        "[leaf] [server] the admin API needs the admin token: send Authorization: Bearer <server.adminToken>",
      );
    }
    if (!timingSafeEqual(this.expected, digest(match[1]!))) {
      throw new HttpError(403, HttpCodes.FORBIDDEN, "[leaf] [server] the admin token is not valid");
    }
  }
}

/**
 * The query string's `token` (an access token) replaced, for logs: a token is never written out.
 */
export function hideToken(url: string): string {
  const at = url.indexOf("?");
  if (at < 0) return url;
  const query = url
    .slice(at + 1)
    .split("&")
    .map((pair) => (queryName(pair) === "token" ? "token=(hidden)" : pair))
    .join("&");
  return `${url.slice(0, at)}?${query}`;
}

/** The decoded name of one `name=value` pair of a query string, as the query parser reads it. */
function queryName(pair: string): string {
  const raw = pair.split("=", 1)[0]!.replace(/\+/g, " ");
  try {
    return decodeURIComponent(raw);
  } catch {
    return raw;
  }
}

/** pino's request serializer (fastify's fields) with the query's token hidden. */
export function requestLogFields(request: FastifyRequest): Record<string, unknown> & {
  url: string;
} {
  return {
    method: request.method,
    url: hideToken(request.url),
    host: request.host,
    remoteAddress: request.ip,
    remotePort: request.socket?.remotePort,
  };
}
