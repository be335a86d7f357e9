// The id endpoints: Java Leaf's paths (plain-text decimal ids, `?count=N` for a batch) and the JSON
// API under /api/v1 (ids as strings, never JSON numbers), plus the decode endpoints of both.
import { layouts } from "@leaf/core";
import { SequenceIdFormat } from "@leaf/redis-sequence";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type { AccessTokens } from "./access-tokens";
import { DECODE_LAYOUTS, decodeId, describeLayout, javaDecode, readLayoutName } from "./decode";
import { fastPathRefusal } from "./fast-paths";
import { badParameter } from "./http-errors";
import {
  decodeInput,
  formatField,
  type IdKind,
  jsonId,
  jsonIdsIn,
  readIdForm,
  SEGMENT_IDS,
} from "./id-formats";
import type { AppContext, IdSources } from "./id-sources";
import { API, routeOf } from "./openapi";
import {
  countParam,
  type Query,
  readInteger,
  readParam,
  readTag,
  sequenceFormatParam,
  sequencePrefixParam,
  shardParam,
  single,
  snowflakeIdParam,
} from "./request-params";
import type { RouteRulesConfig } from "./route-rules";

/**
 * Route settings: which mode (metrics, errors), whether errors are Java Leaf's plain text, and the
 * route's parameters (from its entry in openapi.ts; see route-rules.ts).
 */
export interface RouteConfig extends RouteRulesConfig {
  mode?: string;
  java?: boolean;
}

type Req = FastifyRequest<{ Params: Record<string, string>; Querystring: Query }>;

/** True when the caller asked for JSON (`Accept: application/json`). */
export function wantsJson(request: FastifyRequest): boolean {
  const accept = request.headers.accept;
  return typeof accept === "string" && accept.includes("application/json");
}

/** Ids as text, one per line. */
function lines(ids: bigint[]): string {
  return `${ids.join("\n")}\n`;
}

/** Ids as a JSON array of strings, built without JSON.stringify (ids are digits only). */
function jsonIds(ids: bigint[]): string {
  return ids.length === 0 ? "[]" : `["${ids.join('","')}"]`;
}

function sendBatch(
  request: FastifyRequest,
  reply: FastifyReply,
  ids: bigint[],
  extra: string,
): FastifyReply {
  if (wantsJson(request)) {
    return reply
      .type("application/json; charset=utf-8")
      .send(`{${extra}"count":${ids.length},"ids":${jsonIds(ids)}}`);
  }
  return reply.type("text/plain; charset=utf-8").send(lines(ids));
}

/** Registers the id and decode endpoints. */
export function registerIdRoutes(
  app: FastifyInstance,
  ctx: AppContext,
  sources: IdSources,
  tokens: AccessTokens | undefined,
  sequenceFormat: () => SequenceIdFormat | undefined,
): void {
  const maxBatch = ctx.config.server.maxBatch;
  const snowflakeLayout = ctx.config.snowflake?.layout ?? layouts.leaf;
  const snowflakeIds: IdKind = { kind: "snowflake", layout: snowflakeLayout };
  const java: RouteConfig = { java: true };

  // ---- Java Leaf's paths ----------------------------------------------------------------------
  // Every method Java Leaf answers, with any body: Java clients POST with form bodies, JSON or
  // nothing at all. The body is read (up to the body limit) and ignored, in a plugin of their own
  // so that the other routes keep their strict content types. Parameters come from the query
  // string.

  app.register(async (javaPaths) => {
    javaPaths.removeAllContentTypeParsers();
    javaPaths.addContentTypeParser("*", { parseAs: "buffer" }, (_request, _body, done) =>
      done(null, undefined),
    );

    javaPaths.route({
      ...routeOf(API.javaSegment, { ...java, mode: "segment" }),
      handler: (request: Req, reply: FastifyReply) => {
        const tag = readTag(request.params.key, "key");
        if (tokens) tokens.check(request, tag, `tag ${JSON.stringify(tag)}`);
        const count = readInteger(request.query, countParam, maxBatch);
        if (count !== undefined) {
          return sources.segmentIds(tag, count).then((ids) => sendBatch(request, reply, ids, ""));
        }
        const id = sources.segmentId(tag);
        // Sent, not returned: a returned reply is awaited (a listener on its stream per request).
        if (typeof id === "bigint") reply.send(id.toString());
        else return id.then((waited) => reply.send(waited.toString()));
      },
    });

    javaPaths.route({
      ...routeOf(API.javaSnowflake, { ...java, mode: "snowflake" }),
      handler: (request: Req, reply: FastifyReply) => {
        const key = readTag(request.params.key, "key");
        if (tokens) tokens.check(request, key, `key ${JSON.stringify(key)}`);
        const count = readInteger(request.query, countParam, maxBatch);
        if (count !== undefined) {
          return sources.snowflakeIds(count).then((ids) => sendBatch(request, reply, ids, ""));
        }
        // Refused already on the fast path: answered as refused, not asked again.
        const refusal = fastPathRefusal(request.raw);
        if (refusal !== undefined) throw refusal;
        reply.send(sources.snowflakeId().toString());
      },
    });

    javaPaths.route({
      ...routeOf(API.javaDecode, java),
      handler: (request: Req, reply: FastifyReply) => {
        const raw = readParam(request.query, snowflakeIdParam)!;
        return reply.send(javaDecode(raw, snowflakeLayout));
      },
    });
  });

  // ---- JSON API -------------------------------------------------------------------------------

  app.route({
    ...routeOf(API.segmentId, { mode: "segment" }),
    handler: (request: Req, reply: FastifyReply) => {
      const tag = readTag(request.params.tag);
      if (tokens) tokens.check(request, tag, `tag ${JSON.stringify(tag)}`);
      const form = readIdForm(request.query, SEGMENT_IDS);
      const id = sources.segmentId(tag);
      const answer = (value: bigint) =>
        reply
          .type("application/json; charset=utf-8")
          .send(`{"tag":${JSON.stringify(tag)},"id":${jsonId(value, form)}${formatField(form)}}`);
      return typeof id === "bigint" ? answer(id) : id.then(answer);
    },
  });

  app.route({
    ...routeOf(API.segmentIds, { mode: "segment" }),
    handler: async (request: Req, reply: FastifyReply) => {
      const tag = readTag(request.params.tag);
      if (tokens) tokens.check(request, tag, `tag ${JSON.stringify(tag)}`);
      const count = readInteger(request.query, countParam, maxBatch) ?? 1;
      const form = readIdForm(request.query, SEGMENT_IDS);
      const ids = await sources.segmentIds(tag, count);
      const body = form === undefined ? jsonIds(ids) : jsonIdsIn(ids, form);
      return reply
        .type("application/json; charset=utf-8")
        .send(`{"tag":${JSON.stringify(tag)},"count":${count},"ids":${body}${formatField(form)}}`);
    },
  });

  app.route({
    ...routeOf(API.snowflakeId, { mode: "snowflake" }),
    handler: (request: Req, reply: FastifyReply) => {
      checkSnowflakeToken(request);
      const form = readIdForm(request.query, snowflakeIds);
      const id = sources.snowflakeId();
      return reply
        .type("application/json; charset=utf-8")
        .send(`{"id":${jsonId(id, form)}${formatField(form)}}`);
    },
  });

  app.route({
    ...routeOf(API.snowflakeIds, { mode: "snowflake" }),
    handler: (request: Req, reply: FastifyReply) => {
      checkSnowflakeToken(request);
      const count = readInteger(request.query, countParam, maxBatch) ?? 1;
      const form = readIdForm(request.query, snowflakeIds);
      return sources
        .snowflakeIds(count)
        .then((ids) =>
          reply
            .type("application/json; charset=utf-8")
            .send(
              `{"count":${count},"ids":${form === undefined ? jsonIds(ids) : jsonIdsIn(ids, form)}${formatField(form)}}`,
            ),
        );
    },
  });

  function checkSnowflakeToken(request: Req): void {
    const raw = single(request.query, "key");
    const key = raw === undefined ? "*" : readTag(raw, "key");
    if (tokens)
      tokens.check(
        request,
        key,
        raw === undefined ? "snowflake ids" : `key ${JSON.stringify(key)}`,
      );
  }

  /** The shard, format and prefix of a redis sequence request, checked (tokens first). */
  function redisQuery(request: Req) {
    const { sequence, prefix: defaultPrefix } = sources.redisSequence();
    if (tokens) tokens.check(request, "*", "redis sequence ids");
    const shard = readInteger(request.query, shardParam, sequence.layout.maxWorkerId) ?? 0;
    const format = readParam(request.query, sequenceFormatParam) ?? "long";
    const given = readParam(request.query, sequencePrefixParam);
    const prefix = given ?? defaultPrefix;
    if (format === "long" && given !== undefined) {
      throw badParameter(
        "prefix",
        given,
        "no prefix with format=long (a prefix belongs to format=string)",
      );
    }
    return { sequence, shard, format, prefix };
  }

  app.route({
    ...routeOf(API.sequenceId, { mode: "redisSequence" }),
    handler: async (request: Req, reply: FastifyReply) => {
      const { sequence, shard, format, prefix } = redisQuery(request);
      const id = await sources.redisId(shard);
      const text = format === "string" ? sequence.format(id, prefix) : id.toString();
      return reply
        .type("application/json; charset=utf-8")
        .send(`{"id":${JSON.stringify(text)},"shard":${shard},"format":"${format}"}`);
    },
  });

  app.route({
    ...routeOf(API.sequenceIds, { mode: "redisSequence" }),
    handler: async (request: Req, reply: FastifyReply) => {
      const { sequence, shard, format, prefix } = redisQuery(request);
      const count = readInteger(request.query, countParam, maxBatch) ?? 1;
      const ids = await sources.redisIds(shard, count);
      const body =
        format === "string"
          ? JSON.stringify(ids.map((id) => sequence.format(id, prefix)))
          : jsonIds(ids);
      return reply
        .type("application/json; charset=utf-8")
        .send(`{"shard":${shard},"format":"${format}","count":${count},"ids":${body}}`);
    },
  });

  app.route({
    ...routeOf(API.decode),
    handler: (request: Req, reply: FastifyReply) => {
      const layout = readLayoutName(single(request.query, "layout"));
      const id = decodeInput(request.params.id!, request.query, layout, snowflakeLayout);
      const timeZone = single(request.query, "timeZone");
      if (timeZone !== undefined && layout !== "redis-sequence") {
        throw badParameter(
          "timeZone",
          timeZone,
          "no timeZone: it applies to layout=redis-sequence only",
        );
      }
      const format = timeZone === undefined ? sequenceFormat() : formatIn(timeZone);
      return reply.send(decodeId(id, layout, snowflakeLayout, format));
    },
  });

  app.get(API.layouts.url, (_request: Req, reply: FastifyReply) => {
    const all = DECODE_LAYOUTS.map((name) =>
      describeLayout(
        name,
        name === "snowflake"
          ? snowflakeLayout
          : name === "redis-sequence"
            ? layouts.redisSequence
            : layouts[name],
      ),
    );
    return reply.send({ layouts: all });
  });
}

/**
 * The redis sequence's string form read in `timeZone`; a 400 naming the parameter when it is not a
 * zone.
 */
function formatIn(timeZone: string): SequenceIdFormat {
  try {
    return new SequenceIdFormat({ timeZone });
  } catch {
    throw badParameter(
      "timeZone",
      timeZone,
      'a time zone with a fixed offset: "UTC", "+08:00" or a name such as "Asia/Shanghai"',
    );
  }
}
