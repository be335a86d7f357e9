// The id endpoints: Java Leaf's paths (plain-text decimal ids, `?count=N` for a batch) and the JSON
// API under /api/v1 (ids as strings, never JSON numbers), plus the decode endpoints of both.
import { layouts } from "@leaf/core";
import { SequenceIdFormat } from "@leaf/redis-sequence";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type { AccessTokens } from "./access-tokens";
import { DECODE_LAYOUTS, decodeId, describeLayout, javaDecode, readLayoutName } from "./decode";
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
import {
  type Query,
  readCount,
  readFormat,
  readPrefix,
  readShard,
  readTag,
  single,
} from "./request-params";
import type { RouteRulesConfig } from "./route-rules";

/**
 * Route settings: which mode (metrics, errors), whether errors are Java Leaf's plain text, and the
 * query parameters the route takes (checked for every route in one hook, see route-rules.ts).
 */
export interface RouteConfig extends RouteRulesConfig {
  mode?: string;
  java?: boolean;
}

/**
 * The methods of Java Leaf's paths: Spring's `@RequestMapping` without a method answers each one
 * that reaches a handler. HEAD is left out on purpose: it would take an id and throw it away.
 */
export const JAVA_METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE"] as const;

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
  // nothing at all. The body is read (up to the body limit) and ignored, in a plugin of their own so
  // that the other routes keep their strict content types. Parameters come from the query string.

  app.register(async (javaPaths) => {
    javaPaths.removeAllContentTypeParsers();
    javaPaths.addContentTypeParser("*", { parseAs: "buffer" }, (_request, _body, done) =>
      done(null, undefined),
    );

    javaPaths.route({
      method: [...JAVA_METHODS],
      url: "/api/segment/get/:key",
      config: { ...java, mode: "segment", query: ["count", "token"] },
      handler: (request: Req, reply: FastifyReply) => {
        const tag = readTag(request.params.key, "key");
        if (tokens) tokens.check(request, tag, `tag ${JSON.stringify(tag)}`);
        const count =
          request.query.count === undefined ? undefined : readCount(request.query, maxBatch);
        if (count !== undefined) {
          return sources.segmentIds(tag, count).then((ids) => sendBatch(request, reply, ids, ""));
        }
        const id = sources.segmentId(tag);
        if (typeof id === "bigint") return reply.send(id.toString());
        return id.then((waited) => reply.send(waited.toString()));
      },
    });

    javaPaths.route({
      method: [...JAVA_METHODS],
      url: "/api/snowflake/get/:key",
      config: { ...java, mode: "snowflake", query: ["count", "token"] },
      handler: (request: Req, reply: FastifyReply) => {
        const key = readTag(request.params.key, "key");
        if (tokens) tokens.check(request, key, `key ${JSON.stringify(key)}`);
        if (request.query.count !== undefined) {
          return sources
            .snowflakeIds(readCount(request.query, maxBatch)!)
            .then((ids) => sendBatch(request, reply, ids, ""));
        }
        return reply.send(sources.snowflakeId().toString());
      },
    });

    javaPaths.route({
      method: [...JAVA_METHODS],
      url: "/decodeSnowflakeId",
      config: { ...java, query: ["snowflakeId"] },
      handler: (request: Req, reply: FastifyReply) => {
        const raw = single(request.query, "snowflakeId");
        if (raw === undefined) {
          throw badParameter(
            "snowflakeId",
            raw,
            "a snowflake id: a decimal integer from 0 to 9223372036854775807, in the query string",
          );
        }
        return reply.send(javaDecode(raw, snowflakeLayout));
      },
    });
  });

  // ---- JSON API -------------------------------------------------------------------------------

  app.get(
    "/api/v1/segment/:tag/id",
    { config: { mode: "segment", query: ["format", "prefix", "token"] } },
    (request: Req, reply: FastifyReply) => {
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
  );

  app.get(
    "/api/v1/segment/:tag/ids",
    { config: { mode: "segment", query: ["count", "format", "prefix", "token"] } },
    async (request: Req, reply: FastifyReply) => {
      const tag = readTag(request.params.tag);
      if (tokens) tokens.check(request, tag, `tag ${JSON.stringify(tag)}`);
      const count = readCount(request.query, maxBatch) ?? 1;
      const form = readIdForm(request.query, SEGMENT_IDS);
      const ids = await sources.segmentIds(tag, count);
      const body = form === undefined ? jsonIds(ids) : jsonIdsIn(ids, form);
      return reply
        .type("application/json; charset=utf-8")
        .send(`{"tag":${JSON.stringify(tag)},"count":${count},"ids":${body}${formatField(form)}}`);
    },
  );

  app.get(
    "/api/v1/snowflake/id",
    { config: { mode: "snowflake", query: ["key", "format", "prefix", "token"] } },
    (request: Req, reply: FastifyReply) => {
      checkSnowflakeToken(request);
      const form = readIdForm(request.query, snowflakeIds);
      const id = sources.snowflakeId();
      return reply
        .type("application/json; charset=utf-8")
        .send(`{"id":${jsonId(id, form)}${formatField(form)}}`);
    },
  );

  app.get(
    "/api/v1/snowflake/ids",
    { config: { mode: "snowflake", query: ["count", "key", "format", "prefix", "token"] } },
    (request: Req, reply: FastifyReply) => {
      checkSnowflakeToken(request);
      const count = readCount(request.query, maxBatch) ?? 1;
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
  );

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
    const shard = readShard(request.query, sequence.layout.maxWorkerId);
    const format = readFormat(request.query);
    const prefix = readPrefix(request.query, defaultPrefix);
    if (format === "long" && single(request.query, "prefix") !== undefined) {
      throw badParameter(
        "prefix",
        single(request.query, "prefix"),
        "no prefix with format=long (a prefix belongs to format=string)",
      );
    }
    return { sequence, shard, format, prefix };
  }

  app.get(
    "/api/v1/redis-sequence/id",
    { config: { mode: "redisSequence", query: ["shard", "format", "prefix", "token"] } },
    async (request: Req, reply: FastifyReply) => {
      const { sequence, shard, format, prefix } = redisQuery(request);
      const id = await sources.redisId(shard);
      const text = format === "string" ? sequence.format(id, prefix) : id.toString();
      return reply
        .type("application/json; charset=utf-8")
        .send(`{"id":${JSON.stringify(text)},"shard":${shard},"format":"${format}"}`);
    },
  );

  app.get(
    "/api/v1/redis-sequence/ids",
    { config: { mode: "redisSequence", query: ["shard", "count", "format", "prefix", "token"] } },
    async (request: Req, reply: FastifyReply) => {
      const { sequence, shard, format, prefix } = redisQuery(request);
      const count = readCount(request.query, maxBatch) ?? 1;
      const ids = await sources.redisIds(shard, count);
      const body =
        format === "string"
          ? JSON.stringify(ids.map((id) => sequence.format(id, prefix)))
          : jsonIds(ids);
      return reply
        .type("application/json; charset=utf-8")
        .send(`{"shard":${shard},"format":"${format}","count":${count},"ids":${body}}`);
    },
  );

  app.get(
    "/api/v1/decode/:id",
    { config: { query: ["layout", "timeZone", "format", "prefix"] } },
    (request: Req, reply: FastifyReply) => {
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
  );

  app.get("/api/v1/layouts", (_request: Req, reply: FastifyReply) => {
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

/** The redis sequence's string form read in `timeZone`; a 400 naming the parameter when it is not a zone. */
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
