// The single-id Java paths, GET /api/segment/get/:key and GET /api/snowflake/get/:key, answered
// before fastify routes the request when nothing in it needs fastify: a GET without query string or
// body, a key of plain characters, the server running (not draining: no `Connection: close` to
// add), no access tokens, no request log, and an id at hand at once. The answer is the fastify
// route's (the id as plain text, the same headers), counted as the route counts it (the http_*
// series, the monitor's activity, the ids issued). Any other request, and any of these without an
// id at hand (a tag still loading, any error), goes on to fastify, whose routes answer it as always.
// fastify's routing, hooks and reply cost about as much as the id itself on such a request; this
// is what keeps these two paths near the fastest id server Node allows (bench/src/http.ts).
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { performance } from "node:perf_hooks";
import type { FastifyServerFactoryHandler } from "fastify";
import type { AppContext, IdSources } from "./id-sources";
import { AnswerCounter } from "./observability";
import { API } from "./openapi";

/** Answers `request` and returns true, or returns false having done nothing. */
export type FastPath = (request: IncomingMessage, response: ServerResponse) => boolean;

/** Java Leaf's paths up to the key. */
const SEGMENT_PREFIX = API.javaSegment.url.replace(":key", "");
const SNOWFLAKE_PREFIX = API.javaSnowflake.url.replace(":key", "");
/** A key taken as it is: nothing percent-encoded, no query string, valid as a tag. */
const PLAIN_KEY = /^[A-Za-z0-9._~-]{1,128}$/;
/** The answer's headers by the id's length (1 to 19 digits), made once: fastify's, in its order. */
const HEADERS = Array.from({ length: 20 }, (_, length) => ({
  "content-type": "text/plain; charset=utf-8",
  "content-length": String(length),
}));

/** The fast path of `ctx`'s server, or undefined when its configuration needs fastify on every request. */
export function fastIdPaths(ctx: AppContext, sources: IdSources): FastPath | undefined {
  const { server } = ctx.config;
  if (server.accessTokens !== undefined || server.requestLog) return undefined;
  const namespace = ctx.config.redisSequence?.namespace ?? "";
  const segment = new AnswerCounter(ctx.metrics, API.javaSegment.url, "segment", namespace);
  const snowflake = new AnswerCounter(ctx.metrics, API.javaSnowflake.url, "snowflake", namespace);
  return (request, response) => {
    if (
      request.method !== "GET" ||
      ctx.state !== "running" ||
      ctx.portClosed === true ||
      ctx.modesClosing === true
    ) {
      return false;
    }
    const start = performance.now();
    const url = request.url!;
    let counter: AnswerCounter;
    let key: string;
    if (url.startsWith(SEGMENT_PREFIX)) {
      counter = segment;
      key = url.slice(SEGMENT_PREFIX.length);
    } else if (url.startsWith(SNOWFLAKE_PREFIX)) {
      counter = snowflake;
      key = url.slice(SNOWFLAKE_PREFIX.length);
    } else {
      return false;
    }
    if (!PLAIN_KEY.test(key) || hasBody(request)) return false;
    let id: bigint | undefined;
    if (counter === segment) id = sources.segmentIdNow(key);
    else {
      try {
        id = sources.snowflakeId();
      } catch {
        return false; // fastify's route asks again, and answers the error as it does
      }
    }
    if (id === undefined) return false;
    const text = id.toString();
    response.writeHead(200, HEADERS[text.length]);
    response.end(text);
    counter.count("GET", 200, (performance.now() - start) / 1000, key);
    return true;
  };
}

function hasBody(request: IncomingMessage): boolean {
  const { headers } = request;
  return headers["transfer-encoding"] !== undefined || (headers["content-length"] ?? "0") !== "0";
}

/**
 * fastify's `serverFactory`: the HTTP server fastify would make (its timeouts from fastify's
 * options), whose requests go to `fastPath()` first and to fastify's handler when it declines.
 */
export function serverWithFastPath(
  handler: FastifyServerFactoryHandler,
  options: Record<string, unknown>,
  fastPath: () => FastPath | undefined,
): Server {
  const server = createServer((request, response) => {
    const fast = fastPath();
    if (fast === undefined || !fast(request, response)) handler(request, response);
  });
  server.keepAliveTimeout = options.keepAliveTimeout as number;
  server.requestTimeout = options.requestTimeout as number;
  server.setTimeout(options.connectionTimeout as number);
  const perSocket = options.maxRequestsPerSocket as number | undefined;
  if (perSocket !== undefined && perSocket > 0) server.maxRequestsPerSocket = perSocket;
  return server;
}
