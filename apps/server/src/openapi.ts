// The OpenAPI 3.1 document of the HTTP API, served at /openapi.json. A test checks that every
// route the server registers is described here and that nothing described is missing.
import { DECODE_LAYOUTS } from "./decode";
import {
  bearer,
  countParam,
  errorBody,
  errors,
  formatName,
  formatParam,
  formattedId,
  formattedIds,
  idFormatParam,
  idPrefixParam,
  idString,
  javaOperations,
  json,
  prefixParam,
  shardParam,
  tagParam,
  tagRecord,
  text,
  tokenParam,
} from "./openapi-parts";

export function openApiDocument(version: string) {
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
    paths: {
      "/api/segment/get/{key}": javaOperations({
        tags: ["Java Leaf"],
        summary: "Segment id (Java Leaf's path)",
        description:
          "Plain-text decimal id. With `count`, ids one per line (or JSON with `Accept: application/json`). Errors: plain text starting with Java Leaf's `Result{id=-N, status=EXCEPTION}`.",
        parameters: [tagParam("key"), countParam, tokenParam],
        responses: {
          "200": text("The id, or ids one per line"),
          ...errors(400, 401, 403, 404, 410, 503),
        },
      }),
      "/api/snowflake/get/{key}": javaOperations({
        tags: ["Java Leaf"],
        summary:
          "Snowflake id (Java Leaf's path; the key selects nothing, except its access token)",
        parameters: [tagParam("key"), countParam, tokenParam],
        responses: {
          "200": text("The id, or ids one per line"),
          ...errors(400, 401, 403, 404, 503),
        },
      }),
      "/decodeSnowflakeId": javaOperations({
        tags: ["Java Leaf"],
        summary: "Decode a snowflake id with the configured layout and epoch (Java Leaf's shape)",
        parameters: [{ name: "snowflakeId", in: "query", required: true, schema: idString }],
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
      }),
      "/api/v1/segment/{tag}/id": {
        get: {
          tags: ["Ids"],
          summary: "One segment id",
          parameters: [tagParam("tag"), idFormatParam, idPrefixParam, tokenParam],
          responses: {
            "200": json({
              type: "object",
              properties: { tag: { type: "string" }, id: formattedId, format: formatName },
            }),
            ...errors(400, 401, 403, 404, 410, 503),
          },
        },
      },
      "/api/v1/segment/{tag}/ids": {
        get: {
          tags: ["Ids"],
          summary: "Consecutive segment ids",
          parameters: [tagParam("tag"), countParam, idFormatParam, idPrefixParam, tokenParam],
          responses: { "200": json(formattedIds), ...errors(400, 401, 403, 404, 410, 503) },
        },
      },
      "/api/v1/segment/{tag}/range": {
        get: {
          tags: ["Ids"],
          summary: "A range of consecutive segment ids, for clients that hand ids out themselves",
          description:
            "The ids from start (included) to end (excluded), taken from the server's double buffer: no database round trip while it holds ids. The range is cut where the server's current segment ends, so it may hold fewer than count ids (at least one): ask again for more. Every id of the range is the caller's; ids it leaves unused are a gap, never handed out again.",
          parameters: [
            tagParam("tag"),
            {
              name: "count",
              in: "query",
              required: true,
              description: "The most ids the range may hold, 1 to 2,147,483,647.",
              schema: { type: "integer", minimum: 1, maximum: 2_147_483_647 },
            },
            tokenParam,
          ],
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
      },
      "/api/v1/snowflake/id": {
        get: {
          tags: ["Ids"],
          summary: "One snowflake id",
          parameters: [
            {
              name: "key",
              in: "query",
              required: false,
              description: "Only selects the access token.",
              schema: { type: "string" },
            },
            idFormatParam,
            idPrefixParam,
            tokenParam,
          ],
          responses: {
            "200": json({ type: "object", properties: { id: formattedId, format: formatName } }),
            ...errors(400, 401, 403, 404, 503),
          },
        },
      },
      "/api/v1/snowflake/ids": {
        get: {
          tags: ["Ids"],
          summary: "Snowflake ids in increasing order",
          parameters: [
            countParam,
            {
              name: "key",
              in: "query",
              required: false,
              description: "Only selects the access token.",
              schema: { type: "string" },
            },
            idFormatParam,
            idPrefixParam,
            tokenParam,
          ],
          responses: { "200": json(formattedIds), ...errors(400, 401, 403, 404, 503) },
        },
      },
      "/api/v1/redis-sequence/id": {
        get: {
          tags: ["Ids"],
          summary: "One redis sequence id",
          parameters: [shardParam, formatParam, prefixParam, tokenParam],
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
      },
      "/api/v1/redis-sequence/ids": {
        get: {
          tags: ["Ids"],
          summary: "Redis sequence ids",
          parameters: [shardParam, countParam, formatParam, prefixParam, tokenParam],
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
      },
      "/api/v1/decode/{id}": {
        get: {
          tags: ["Ids"],
          summary: "Take an id apart",
          parameters: [
            {
              name: "id",
              in: "path",
              required: true,
              description:
                "Decimal id, a redis sequence string form, or the id in the string form `format` names.",
              schema: { type: "string" },
            },
            {
              name: "layout",
              in: "query",
              required: false,
              description:
                "snowflake (this server's configured layout, default), leaf, sonyflake, baidu, safe53ms, safe53s, redis-sequence.",
              schema: { type: "string", enum: [...DECODE_LAYOUTS] },
            },
            {
              ...idFormatParam,
              description:
                "The string form `{id}` is in, with the widths of the layout named (not with redis-sequence): decimal (default), base62, base36, base32, friendly.",
            },
            idPrefixParam,
            {
              name: "timeZone",
              in: "query",
              required: false,
              description:
                'redis-sequence only: the time zone the string form was made in ("UTC", "+08:00", "Asia/Shanghai"); default this server\'s redisSequence.timeZone, else UTC.',
              schema: { type: "string" },
            },
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
      },
      "/api/v1/layouts": {
        get: {
          tags: ["Ids"],
          summary: "The layouts the decode endpoint knows",
          responses: {
            "200": json({ type: "object", properties: { layouts: { type: "array" } } }),
          },
        },
      },
      "/api/v1/admin/tags": {
        get: {
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
        post: {
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
      },
      "/api/v1/admin/tags/{tag}": {
        patch: {
          tags: ["Admin"],
          summary: "Change a tag's step",
          security: bearer,
          parameters: [tagParam("tag")],
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
        delete: {
          tags: ["Admin"],
          summary: "Delete a tag",
          description:
            "Removes the tag's row from the store; this node stops serving it at once, other nodes at their next tag refresh (every 60 s), serving until then the ranges they hold, all below the answered maxId. The answer holds the row as it was deleted, read and deleted in one transaction: its maxId is above every id the tag handed out. The store keeps it, and creating the tag again with a startId below it is refused (409, details.reason deleted, details.minStartId).",
          security: bearer,
          parameters: [tagParam("tag")],
          responses: {
            "200": json(
              { ...tagRecord, properties: { ...tagRecord.properties, deleted: { const: true } } },
              "Deleted: the row as it was deleted (its final maxId)",
            ),
            ...errors(400, 401, 403, 404, 503),
          },
        },
      },
      "/api/v1/admin/high-water": {
        get: {
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
      },
      "/api/v1/admin/high-water/{tag}": {
        delete: {
          tags: ["Admin"],
          summary: "Forget this node's high-water mark of a tag",
          description:
            "For an operator who knows the tag's max_id is right (or the store is another one): the mark is removed from disk and a tag refused for it is served again if its row is otherwise sane. Ranges this process took since it started still count. Forgetting while max_id is below ids already handed out repeats them.",
          security: bearer,
          parameters: [tagParam("tag")],
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
      },
      "/api/v1/monitor": {
        get: {
          tags: ["Operations"],
          summary:
            "The monitor page's data: segment buffers, snowflake lease, redis sequence state",
          responses: { "200": json({ type: "object" }) },
        },
      },
      "/api/v1/monitor/store": {
        get: {
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
      },
      "/monitor": {
        get: {
          tags: ["Operations"],
          summary: "The live monitor page (HTML)",
          responses: { "200": { description: "HTML" } },
        },
      },
      "/health/live": {
        get: {
          tags: ["Operations"],
          summary: "Liveness: 200 while the process serves",
          responses: {
            "200": json({ type: "object", properties: { status: { type: "string" } } }),
          },
        },
      },
      "/health/ready": {
        get: {
          tags: ["Operations"],
          summary:
            "Readiness: 200 when every enabled mode can serve (segment tag list read, snowflake lease held, Redis answering); no segment tag changes it: the segment check lists tags by state",
          parameters: [
            {
              name: "mode",
              in: "query",
              required: false,
              description: "Check one mode only.",
              schema: { type: "string", enum: ["segment", "snowflake", "redisSequence"] },
            },
          ],
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
      },
      "/metrics": {
        get: {
          tags: ["Operations"],
          summary: "Prometheus metrics",
          responses: { "200": text("Prometheus text format") },
        },
      },
      "/openapi.json": {
        get: {
          tags: ["Operations"],
          summary: "This document",
          responses: { "200": json({ type: "object" }) },
        },
      },
    },
  };
}
