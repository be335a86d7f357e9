// The HTTP API, each route described once: its path, methods, parameters (declared in
// request-params.ts and beside their readers, which check them) and answers. The routes register
// from these entries (routeOf), route-rules.ts refuses the query parameters an entry does not
// declare, and openApiDocument writes them as the OpenAPI 3.1 document served at /openapi.json.
import { layoutParam } from "./decode";
import { idFormatParam, idPrefixParam } from "./id-formats";
import {
  bearer,
  errorBody,
  errors,
  formatName,
  formattedId,
  formattedIds,
  idString,
  javaOperations,
  json,
  openApiParam,
  tagRecord,
  text,
} from "./openapi-parts";
import {
  countParam,
  keyParam,
  modeParam,
  type Param,
  rangeCountParam,
  sequenceFormatParam,
  sequencePrefixParam,
  shardParam,
  snowflakeIdParam,
  tagParam,
  tokenParam,
} from "./request-params";

/**
 * The methods of Java Leaf's paths: Spring's `@RequestMapping` without a method answers each one
 * that reaches a handler. HEAD is left out on purpose: it would take an id and throw it away.
 */
export const JAVA_METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE"] as const;

/**
 * One route: fastify's path (`:tag`), its method ("java": {@link JAVA_METHODS}), its parameters
 * and the rest of its OpenAPI operation.
 */
export interface Operation {
  url: string;
  method: "get" | "post" | "patch" | "delete" | "java";
  params?: readonly Param[];
  summary: string;
  [field: string]: unknown;
}

export const API = {
  javaSegment: {
    url: "/api/segment/get/:key",
    method: "java",
    tags: ["Java Leaf"],
    summary: "Segment id (Java Leaf's path)",
    description:
      "Plain-text decimal id. With `count`, ids one per line (or JSON with `Accept: application/json`). Errors: plain text starting with Java Leaf's `Result{id=-N, status=EXCEPTION}`.",
    params: [tagParam("key"), countParam, tokenParam],
    responses: {
      "200": text("The id, or ids one per line"),
      ...errors(400, 401, 403, 404, 410, 503),
    },
  },
  javaSnowflake: {
    url: "/api/snowflake/get/:key",
    method: "java",
    tags: ["Java Leaf"],
    summary: "Snowflake id (Java Leaf's path; the key selects nothing, except its access token)",
    params: [tagParam("key"), countParam, tokenParam],
    responses: {
      "200": text("The id, or ids one per line"),
      ...errors(400, 401, 403, 404, 503),
    },
  },
  javaDecode: {
    url: "/decodeSnowflakeId",
    method: "java",
    tags: ["Java Leaf"],
    summary: "Decode a snowflake id with the configured layout and epoch (Java Leaf's shape)",
    params: [snowflakeIdParam],
    responses: {
      "200": json({
        type: "object",
        properties: {
          timestamp: { type: "string", examples: ["1588421624602(2020-05-02 20:13:44.602)"] },
          workerId: { type: "string" },
          sequenceId: { type: "string" },
        },
      }),
      ...errors(400),
    },
  },
  segmentId: {
    url: "/api/v1/segment/:tag/id",
    method: "get",
    tags: ["Ids"],
    summary: "One segment id",
    params: [tagParam("tag"), idFormatParam, idPrefixParam, tokenParam],
    responses: {
      "200": json({
        type: "object",
        properties: { tag: { type: "string" }, id: formattedId, format: formatName },
      }),
      ...errors(400, 401, 403, 404, 410, 503),
    },
  },
  segmentIds: {
    url: "/api/v1/segment/:tag/ids",
    method: "get",
    tags: ["Ids"],
    summary: "Consecutive segment ids",
    params: [tagParam("tag"), countParam, idFormatParam, idPrefixParam, tokenParam],
    responses: { "200": json(formattedIds), ...errors(400, 401, 403, 404, 410, 503) },
  },
  segmentRange: {
    url: "/api/v1/segment/:tag/range",
    method: "get",
    tags: ["Ids"],
    summary: "A range of consecutive segment ids, for clients that hand ids out themselves",
    description:
      "The ids from start (included) to end (excluded), taken from the server's double buffer: no database round trip while it holds ids. The range is cut where the server's current segment ends, so it may hold fewer than count ids (at least one): ask again for more. Every id of the range is the caller's; ids it leaves unused are a gap, never handed out again.",
    params: [tagParam("tag"), rangeCountParam, tokenParam],
    responses: {
      "200": json({
        type: "object",
        required: ["tag", "start", "end", "count"],
        properties: {
          tag: { type: "string" },
          start: { ...idString, description: "The first id of the range." },
          end: { ...idString, description: "One past the last id of the range." },
          count: { type: "integer", description: "Ids in the range: end - start." },
        },
      }),
      ...errors(400, 401, 403, 404, 410, 503),
    },
  },
  snowflakeId: {
    url: "/api/v1/snowflake/id",
    method: "get",
    tags: ["Ids"],
    summary: "One snowflake id",
    params: [keyParam, idFormatParam, idPrefixParam, tokenParam],
    responses: {
      "200": json({ type: "object", properties: { id: formattedId, format: formatName } }),
      ...errors(400, 401, 403, 404, 503),
    },
  },
  snowflakeIds: {
    url: "/api/v1/snowflake/ids",
    method: "get",
    tags: ["Ids"],
    summary: "Snowflake ids in increasing order",
    params: [countParam, keyParam, idFormatParam, idPrefixParam, tokenParam],
    responses: { "200": json(formattedIds), ...errors(400, 401, 403, 404, 503) },
  },
  sequenceId: {
    url: "/api/v1/redis-sequence/id",
    method: "get",
    tags: ["Ids"],
    summary: "One redis sequence id",
    params: [shardParam, sequenceFormatParam, sequencePrefixParam, tokenParam],
    responses: {
      "200": json({
        type: "object",
        properties: {
          id: { type: "string" },
          shard: { type: "integer" },
          format: { type: "string" },
        },
      }),
      ...errors(400, 401, 403, 404, 503),
    },
  },
  sequenceIds: {
    url: "/api/v1/redis-sequence/ids",
    method: "get",
    tags: ["Ids"],
    summary: "Redis sequence ids",
    params: [shardParam, countParam, sequenceFormatParam, sequencePrefixParam, tokenParam],
    responses: {
      "200": json({
        type: "object",
        properties: {
          shard: { type: "integer" },
          format: { type: "string" },
          count: { type: "integer" },
          ids: { type: "array", items: { type: "string" } },
        },
      }),
      ...errors(400, 401, 403, 404, 503),
    },
  },
  decode: {
    url: "/api/v1/decode/:id",
    method: "get",
    tags: ["Ids"],
    summary: "Take an id apart",
    params: [
      {
        name: "id",
        in: "path",
        required: true,
        description:
          "Decimal id, a redis sequence string form, or the id in the string form `format` names.",
        schema: { type: "string" },
      },
      layoutParam,
      {
        name: "timeZone",
        in: "query",
        required: false,
        description:
          'redis-sequence only: the time zone the string form was made in ("UTC", "+08:00", "Asia/Shanghai"); default this server\'s redisSequence.timeZone, else UTC.',
        schema: { type: "string" },
      },
      {
        ...idFormatParam,
        description:
          "The string form `{id}` is in, with the widths of the layout named (not with redis-sequence): decimal (default), base62, base36, base32, friendly.",
      },
      idPrefixParam,
    ],
    responses: {
      "200": json({
        type: "object",
        properties: {
          id: idString,
          layout: { type: "string" },
          timeZone: { type: "string" },
          timestampMs: { type: "integer" },
          time: { type: "string", format: "date-time" },
          workerId: { type: "integer" },
          sequence: { type: "integer" },
          shard: { type: "integer" },
          stringForm: { type: "string" },
          epoch: { type: "integer" },
          bits: { type: "object" },
        },
      }),
      ...errors(400),
    },
  },
  layouts: {
    url: "/api/v1/layouts",
    method: "get",
    tags: ["Ids"],
    summary: "The layouts the decode endpoint knows",
    responses: {
      "200": json({ type: "object", properties: { layouts: { type: "array" } } }),
    },
  },
  listTags: {
    url: "/api/v1/admin/tags",
    method: "get",
    tags: ["Admin"],
    summary: "List tags (served only when server.adminToken is set)",
    security: bearer,
    responses: {
      "200": json({
        type: "object",
        properties: {
          store: { type: "string" },
          count: { type: "integer" },
          tags: { type: "array", items: tagRecord },
        },
      }),
      ...errors(401, 403, 404, 503),
    },
  },
  createTag: {
    url: "/api/v1/admin/tags",
    method: "post",
    tags: ["Admin"],
    summary: "Create a tag",
    security: bearer,
    requestBody: {
      required: true,
      content: {
        "application/json": {
          schema: {
            type: "object",
            required: ["tag", "step"],
            properties: {
              tag: { type: "string", minLength: 1, maxLength: 128 },
              step: { type: "integer", minimum: 1, maximum: 2147483647 },
              startId: {
                ...idString,
                description:
                  "First id (default 1). For a tag deleted before, at least the maxId it was deleted with (409 otherwise).",
              },
              description: { type: ["string", "null"], maxLength: 256 },
            },
            additionalProperties: false,
          },
        },
      },
    },
    responses: { "201": json(tagRecord, "Created"), ...errors(400, 401, 403, 404, 409, 503) },
  },
  changeStep: {
    url: "/api/v1/admin/tags/:tag",
    method: "patch",
    tags: ["Admin"],
    summary: "Change a tag's step",
    security: bearer,
    params: [tagParam("tag")],
    requestBody: {
      required: true,
      content: {
        "application/json": {
          schema: {
            type: "object",
            required: ["step"],
            properties: { step: { type: "integer", minimum: 1, maximum: 2147483647 } },
            additionalProperties: false,
          },
        },
      },
    },
    responses: { "200": json(tagRecord), ...errors(400, 401, 403, 404, 503) },
  },
  deleteTag: {
    url: "/api/v1/admin/tags/:tag",
    method: "delete",
    tags: ["Admin"],
    summary: "Delete a tag",
    description:
      "Removes the tag's row from the store; this node stops serving it at once, other nodes at their next tag refresh (every 60 s), serving until then the ranges they hold, all below the answered maxId. The answer holds the row as it was deleted, read and deleted in one transaction: its maxId is above every id the tag handed out. The store keeps it, and creating the tag again with a startId below it is refused (409, details.reason deleted, details.minStartId).",
    security: bearer,
    params: [tagParam("tag")],
    responses: {
      "200": json(
        { ...tagRecord, properties: { ...tagRecord.properties, deleted: { const: true } } },
        "Deleted: the row as it was deleted (its final maxId)",
      ),
      ...errors(400, 401, 403, 404, 503),
    },
  },
  highWater: {
    url: "/api/v1/admin/high-water",
    method: "get",
    tags: ["Admin"],
    summary: "This node's segment high-water marks",
    description:
      "Per tag, the end of the highest range this node took from its store, kept in dataDir/segment-high-water and read at start: a tag whose max_id is below it is refused (CORRUPT_DATA), not served again. `seen`: the highest max_id this node read in the tag's row at a refresh (other nodes' ranges up to that read); no id below it is served.",
    security: bearer,
    responses: {
      "200": json({
        type: "object",
        properties: {
          count: { type: "integer" },
          marks: {
            type: "array",
            items: {
              type: "object",
              properties: {
                tag: { type: "string" },
                highWater: idString,
                seen: { oneOf: [idString, { type: "null" }] },
              },
            },
          },
        },
      }),
      ...errors(401, 403, 404, 503),
    },
  },
  forgetHighWater: {
    url: "/api/v1/admin/high-water/:tag",
    method: "delete",
    tags: ["Admin"],
    summary: "Forget this node's high-water mark of a tag",
    description:
      "For an operator who knows the tag's max_id is right (or the store is another one): the mark is removed from disk and a tag refused for it is served again if its row is otherwise sane. Ranges this process took since it started still count. Forgetting while max_id is below ids already handed out repeats them.",
    security: bearer,
    params: [tagParam("tag")],
    responses: {
      "200": json({
        type: "object",
        properties: {
          tag: { type: "string" },
          forgotten: { oneOf: [idString, { type: "null" }] },
          refused: { type: "boolean" },
        },
      }),
      ...errors(400, 401, 403, 404, 503),
    },
  },
  monitorData: {
    url: "/api/v1/monitor",
    method: "get",
    tags: ["Operations"],
    summary: "The monitor page's data: segment buffers, snowflake lease, redis sequence state",
    responses: { "200": json({ type: "object" }) },
  },
  monitorStore: {
    url: "/api/v1/monitor/store",
    method: "get",
    tags: ["Operations"],
    summary: "The store's rows (Java Leaf's /db page)",
    responses: {
      "200": json({
        type: "object",
        properties: { rows: { type: "array", items: tagRecord } },
      }),
      ...errors(404, 503),
    },
  },
  monitorPage: {
    url: "/monitor",
    method: "get",
    tags: ["Operations"],
    summary: "The live monitor page (HTML)",
    responses: { "200": { description: "HTML" } },
  },
  live: {
    url: "/health/live",
    method: "get",
    tags: ["Operations"],
    summary: "Liveness: 200 while the process serves",
    responses: {
      "200": json({ type: "object", properties: { status: { type: "string" } } }),
    },
  },
  ready: {
    url: "/health/ready",
    method: "get",
    tags: ["Operations"],
    summary:
      "Readiness: 200 when every enabled mode can serve (segment tag list read, snowflake lease held, Redis answering); no segment tag changes it: the segment check lists tags by state",
    params: [modeParam],
    responses: {
      "200": json({
        type: "object",
        properties: { ready: { type: "boolean" }, checks: { type: "object" } },
      }),
      "503": json(
        {
          type: "object",
          properties: { ready: { type: "boolean" }, checks: { type: "object" } },
        },
        "Not ready (starting, draining, stopping, lease lost, Redis unavailable); with Retry-After",
      ),
      ...errors(400),
    },
  },
  metrics: {
    url: "/metrics",
    method: "get",
    tags: ["Operations"],
    summary: "Prometheus metrics",
    responses: { "200": text("Prometheus text format") },
  },
  openapi: {
    url: "/openapi.json",
    method: "get",
    tags: ["Operations"],
    summary: "This document",
    responses: { "200": json({ type: "object" }) },
  },
} satisfies Record<string, Operation>;

/** fastify's method, path and parameter declaration of `op`, with the route's other `config`. */
export function routeOf(op: Operation, config: object = {}) {
  return {
    method: op.method === "java" ? [...JAVA_METHODS] : op.method.toUpperCase(),
    url: op.url,
    config: { ...config, params: op.params ?? [] },
  };
}

/** The document, for the server's version. */
export function openApiDocument(version: string) {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const op of Object.values(API) as Operation[]) {
    const { url, method, params, ...rest } = op;
    const operation = params ? { ...rest, parameters: params.map(openApiParam) } : rest;
    const path = url.replace(/:(\w+)/g, "{$1}");
    paths[path] = {
      ...paths[path],
      ...(method === "java" ? javaOperations(operation) : { [method]: operation }),
    };
  }
  return {
    openapi: "3.1.0",
    info: {
      title: "Leaf id service",
      version,
      description:
        "Distributed ids: segment mode (ranges of a leaf_alloc table), snowflake mode (time + worker id + sequence) and redis sequence (time + shard + sequence). Java Leaf's paths answer plain text as Java Leaf does, to GET, POST, PUT, PATCH and DELETE; the JSON API under /api/v1 gives every id as a string. Every route takes only the query parameters listed here: any other is a 400 (INVALID_ARGUMENT) naming it and listing the accepted ones, and nothing is issued. A method a path does not answer gets 405 (METHOD_NOT_ALLOWED) with an Allow header; HEAD is answered by the health checks only. Errors, also 431 (request headers too large), have the Error shape.",
    },
    components: {
      schemas: { Error: errorBody, Id: idString },
      securitySchemes: {
        adminToken: { type: "http", scheme: "bearer", description: "server.adminToken" },
      },
    },
    paths,
  };
}
