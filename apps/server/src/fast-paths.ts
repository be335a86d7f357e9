// The single-id Java paths, GET /api/segment/get/:key and GET /api/snowflake/get/:key, answered
// before fastify routes the request when nothing in it needs fastify: a GET without query string or
// body, a key of plain characters, the server running (not draining: no `Connection: close` to
// add), no access tokens, no request log, and an id at hand at once. The answer is the fastify
// route's (the id as plain text, the same headers), counted as the route counts it once it is sent
// (the http_* series, the monitor's activity; the ids issued as soon as one is taken). Any other
// request, and any of these without an id at hand (a tag still loading, any error), goes on to
// fastify, whose routes answer it as always; a snowflake refusal is handed to the route with the
// request, so that what the refusal did (a clock rollback counted, logged) happens once.
// fastify's routing, hooks and reply cost about as much as the id itself on such a request; this
// is what keeps these two paths near the fastest id server Node allows (bench/src/http.ts).
import type { IncomingMessage, Server, ServerResponse } from "node:http";
import { performance } from "node:perf_hooks";
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
/**
 * Every answer of this server is marked not to be stored by a cache (an HTTP cache that kept an
 * id's answer would hand the same id to the next client that asks), through app.ts's hook and in
 * the fast path's own headers.
 */
export const NO_STORE = "no-store";
/**
 * The answer's headers by the id's length (1 to 19 digits), made once: fastify's, in its order,
 * with the `cache-control` every answer of this server carries (app.ts).
 */
const HEADERS = Array.from({ length: 20 }, (_, length) => ({
  "content-type": "text/plain; charset=utf-8",
  "cache-control": NO_STORE,
  "content-length": String(length),
}));

/**
 * The fast path of `ctx`'s server, or undefined when its configuration needs fastify on every
 * request.
 */
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
      } catch (error) {
        // fastify's route answers this refusal as it does, without asking the generator again.
        (request as RefusedRequest)[REFUSAL] = error;
        return false;
      }
    }
    if (id === undefined) return false;
    const text = id.toString();
    response.writeHead(200, HEADERS[text.length]);
    response.end(text);
    // Counted once sent, as fastify counts a route's answer (its onResponse hook): an answer a
    // client never takes (its connection reset with requests pipelined) is not counted. One shared
    // listener reading what it counts from the response, not a closure per request.
    const answer = response as FastAnswer;
    answer[COUNTED] = { counter, start, key };
    response.on("finish", counted);
    return true;
  };
}

/** What a fast answer's 'finish' listener counts. */
const COUNTED = Symbol("leaf.fastPathCounted");
type FastAnswer = ServerResponse & {
  [COUNTED]?: { counter: AnswerCounter; start: number; key: string };
};

/** A fast answer's 'finish' listener: counts it once sent. */
function counted(this: FastAnswer): void {
  const { counter, start, key } = this[COUNTED]!;
  counter.count("GET", 200, (performance.now() - start) / 1000, key);
}

/** Where a request carries the refusal the fast path met, for the route. */
const REFUSAL = Symbol("leaf.fastPathRefusal");
type RefusedRequest = IncomingMessage & { [REFUSAL]?: unknown };

/**
 * The error the fast path met asking for an id for `request` (fastify's `request.raw`), if any:
 * the route throws it rather than asking again, so that a refusal is counted and logged once.
 */
export function fastPathRefusal(request: IncomingMessage): unknown {
  return (request as RefusedRequest)[REFUSAL];
}

function hasBody(request: IncomingMessage): boolean {
  const { headers } = request;
  return headers["transfer-encoding"] !== undefined || (headers["content-length"] ?? "0") !== "0";
}

/**
 * Puts `fastPath` in front of fastify's request handler on `server` (fastify's own HTTP server,
 * `app.server`): a request goes to fastify when the fast path declines it. Not through fastify's
 * `serverFactory`, with which fastify binds only the first address of a host name (`localhost`:
 * `::1` or `127.0.0.1`, not both). A server fastify makes for another address of the host answers
 * every request through fastify. Does nothing unless fastify's handler is the server's one
 * `request` listener.
 */
export function putFastPathFirst(server: Server, fastPath: FastPath): void {
  const listeners = server.listeners("request");
  if (listeners.length !== 1) return;
  const handler = listeners[0] as (request: IncomingMessage, response: ServerResponse) => void;
  server.removeListener("request", handler);
  server.on("request", (request: IncomingMessage, response: ServerResponse) => {
    if (!fastPath(request, response)) handler.call(server, request, response);
  });
}
