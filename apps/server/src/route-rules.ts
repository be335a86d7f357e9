// Rules every route follows, declared once on the route and checked in one place: the query
// parameters it takes (any other is a 400 naming it, so a typo like `cout` never silently gives one
// id), the methods its path answers (any other is a 405 with `Allow`), and the client errors Node
// answers before fastify sees a request (431 and others), in the project's error shape.
import { STATUS_CODES } from "node:http";
import type { Socket } from "node:net";
import { ErrorCodes, LeafError } from "@leaf/core";
import type {
  FastifyInstance,
  FastifyReply,
  FastifyRequest,
  onRequestHookHandler,
  RouteOptions,
} from "fastify";
import { HttpCodes } from "./http-errors";
import type { Param } from "./request-params";

/** What a route declares in its `config` for these rules. */
export interface RouteRulesConfig {
  /** The route's parameters (see openapi.ts routeOf): any other query parameter is a 400. */
  params?: readonly Param[];
  /** `"*"`: every parameter goes through (only for catch-alls such as "the admin API is off"). */
  query?: "*";
}

/** The query parameters a route takes: `"*"`, or the names it declares (none by default). */
function acceptedQuery(config: RouteRulesConfig | undefined): readonly string[] | "*" {
  if (config === undefined) return [];
  let accepted = ACCEPTED.get(config);
  if (accepted === undefined) {
    accepted =
      config.query === "*"
        ? "*"
        : (config.params ?? []).filter((p) => p.in === "query").map((p) => p.name);
    ACCEPTED.set(config, accepted);
  }
  return accepted;
}

/** Each route's accepted names, worked out once (the check runs on every request). */
const ACCEPTED = new WeakMap<RouteRulesConfig, readonly string[] | "*">();

/** One registered path and what it answers. */
interface PathEntry {
  url: string;
  pattern: RegExp;
  methods: Set<string>;
  /** Accepted query parameters per method. */
  query: Map<string, readonly string[] | "*">;
}

/** fastify's path syntax (`:param`, `*`) as a regular expression over the raw path. */
function pathPattern(url: string): RegExp {
  const source = url
    .split("/")
    .map((part) => {
      if (part === "*") return ".*";
      if (part.startsWith(":")) return "[^/]+";
      return part.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
    })
    .join("/");
  return new RegExp(`^${source}$`);
}

/**
 * The routes of one app by path: which methods each answers and which query parameters each takes.
 */
export class RouteRules {
  private readonly paths = new Map<string, PathEntry>();

  /** Records a route (called from fastify's onRoute hook). */
  add(route: RouteOptions): void {
    let entry = this.paths.get(route.url);
    if (!entry) {
      entry = {
        url: route.url,
        pattern: pathPattern(route.url),
        methods: new Set(),
        query: new Map(),
      };
      this.paths.set(route.url, entry);
    }
    const query = acceptedQuery(route.config as RouteRulesConfig | undefined);
    for (const method of [route.method].flat()) {
      entry.methods.add(method);
      entry.query.set(method, query);
    }
  }

  /** The methods answered at `path` (a request's path, without the query), or none. */
  allowedMethods(path: string): string[] {
    const methods = new Set<string>();
    for (const entry of this.paths.values()) {
      if (entry.pattern.test(path)) for (const method of entry.methods) methods.add(method);
    }
    return [...methods].sort();
  }

  /** Every route's declared query parameters, `"METHOD url"` to names (for the OpenAPI check). */
  declaredQueries(): Map<string, readonly string[] | "*"> {
    const out = new Map<string, readonly string[] | "*">();
    for (const entry of this.paths.values()) {
      for (const [method, query] of entry.query) out.set(`${method} ${entry.url}`, query);
    }
    return out;
  }
}

const RULES = new WeakMap<FastifyInstance, RouteRules>();

/** The rules of an app built by buildApp (for tests and the OpenAPI check). */
export function routeRules(app: FastifyInstance): RouteRules | undefined {
  return RULES.get(app);
}

/** The 400 for query parameters a route does not take: names them and lists the ones it does. */
export function unknownQueryParameters(
  request: FastifyRequest,
  accepted: readonly string[],
): LeafError | undefined {
  const query = request.query as Record<string, unknown> | undefined;
  if (!query) return undefined;
  const unknown = Object.keys(query).filter((name) => !accepted.includes(name));
  if (unknown.length === 0) return undefined;
  const shown = unknown.slice(0, 5).map((name) => JSON.stringify(cut(name, 64)));
  if (unknown.length > 5) shown.push(`and ${unknown.length - 5} more`);
  const route = `${request.method} ${request.routeOptions.url ?? ""}`;
  const takes =
    accepted.length === 0 ? "it takes no query parameters" : `it takes ${accepted.join(", ")}`;
  return new LeafError({
    component: "server",
    code: ErrorCodes.INVALID_ARGUMENT,
    message: `unknown query parameter${unknown.length > 1 ? "s" : ""} ${shown.join(", ")} on ${route}: ${takes} (check the spelling; nothing was issued)`,
    details: {
      unknown: unknown.slice(0, 5).map((name) => cut(name, 64)),
      accepted: [...accepted],
    },
  });
}

/** The onRequest check of the declared query parameters. */
const checkQuery: onRequestHookHandler = (request, _reply, done) => {
  // Most requests carry no query string: nothing to check (and the route's options, which fastify
  // builds anew on each read, are not read).
  if (isEmpty(request.query) || request.is404) return done();
  const accepted = acceptedQuery(request.routeOptions.config as RouteRulesConfig | undefined);
  if (accepted === "*") return done();
  const error = unknownQueryParameters(request, accepted);
  if (error) return done(error);
  done();
};

function isEmpty(query: unknown): boolean {
  for (const _ in query as object) return false;
  return true;
}

/**
 * Registers the rules on `app`: call before the routes, so that every route is recorded. Returns
 * them, for the not-found handler's 405.
 */
export function registerRouteRules(app: FastifyInstance): RouteRules {
  const rules = new RouteRules();
  RULES.set(app, rules);
  app.addHook("onRoute", (route) => rules.add(route));
  app.addHook("onRequest", checkQuery);
  return rules;
}

/**
 * Answers a request whose path exists with another method: 405 with `Allow` listing the path's
 * methods. Returns false (nothing sent) when no route has the path: a real 404.
 */
export function answerWrongMethod(
  rules: RouteRules,
  request: FastifyRequest,
  reply: FastifyReply,
): boolean {
  const path = request.url.split("?")[0]!;
  const allowed = rules.allowedMethods(path);
  if (allowed.length === 0) return false;
  reply
    .code(405)
    .header("allow", allowed.join(", "))
    .send({
      status: 405,
      code: HttpCodes.METHOD_NOT_ALLOWED,
      message: `[leaf] [server] ${cut(request.method, 20)} is not answered at ${cut(path, 200)}; use ${allowed.join(", ")} (the API is described at /openapi.json)`,
      details: { method: cut(request.method, 20), allowed },
    });
  return true;
}

/** Node's client errors, answered before fastify has a request: status and what to do. */
function clientErrorAnswer(code: string | undefined): { status: number; message: string } {
  switch (code) {
    case "HPE_HEADER_OVERFLOW":
      return {
        status: 431,
        message:
          "request header fields too large: the request line and headers together pass the server's limit (Node's --max-http-header-size, 16 KB by default); send fewer or smaller headers (a huge cookie or token?)",
      };
    case "ERR_HTTP_REQUEST_TIMEOUT":
      return {
        status: 408,
        message: "request timeout: the request did not arrive in full in time; send it again",
      };
    default:
      return {
        status: 400,
        message: `bad request: the request is not valid HTTP (${cut(String(code ?? "parse error"), 40)}); check the client`,
      };
  }
}

/**
 * fastify's `clientErrorHandler`: Node's parser refused a request (headers too large, malformed
 * HTTP, timeout) before any route ran. Answers in the project's error shape and closes the socket.
 */
export function answerClientError(error: Error & { code?: string }, socket: Socket): void {
  if (error.code === "ECONNRESET" || socket.destroyed) return;
  // A response already under way on this socket cannot be followed by another: only close.
  const inFlight = (socket as Socket & { _httpMessage?: { headersSent?: boolean } })._httpMessage;
  if (socket.writable && !inFlight?.headersSent) {
    const { status, message } = clientErrorAnswer(error.code);
    const body = JSON.stringify({
      status,
      code: HttpCodes.BAD_REQUEST,
      message: `[leaf] [server] ${message}`,
    });
    socket.end(
      `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nConnection: close\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
    );
    return;
  }
  socket.destroy(error);
}

function cut(text: string, max: number): string {
  return text.length > max ? `${text.slice(0, max)}...` : text;
}
