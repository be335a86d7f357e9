// The range endpoint: a whole run of consecutive segment ids in one answer, taken from the server's
// double buffer, for clients that hand ids out themselves (`@leaf/client`).
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type { AccessTokens } from "./access-tokens";
import type { IdSources } from "./id-sources";
import type { ServerMetrics } from "./metrics";
import { API, routeOf } from "./openapi";
import { type Query, rangeCountParam, readInteger, readTag } from "./request-params";

type Req = FastifyRequest<{ Params: Record<string, string>; Querystring: Query }>;

/**
 * Registers `GET /api/v1/segment/:tag/range?count=N`: `{"tag","start","end","count"}`, the ids
 * `start` (included) to `end` (excluded) as decimal strings. The range is cut where the server's
 * current segment ends, so it may hold fewer than `count` ids (never more, never none); no store
 * round trip while the server's buffers hold ids. Counted in `leaf_ids_issued_total` (every id of
 * the range) and `leaf_segment_ranges_total`.
 */
export function registerRangeRoutes(
  app: FastifyInstance,
  sources: IdSources,
  metrics: ServerMetrics,
  tokens: AccessTokens | undefined,
): void {
  app.route({
    ...routeOf(API.segmentRange, { mode: "segment" }),
    handler: async (request: Req, reply: FastifyReply) => {
      const tag = readTag(request.params.tag);
      if (tokens) tokens.check(request, tag, `tag ${JSON.stringify(tag)}`);
      const count = readInteger(request.query, rangeCountParam)!;
      const { start, end } = await sources.segment().generator.nextRange(tag, count);
      const n = Number(end - start);
      metrics.tally("segment", tag).n += n;
      metrics.segmentRanges.inc({ tag });
      return reply
        .type("application/json; charset=utf-8")
        .send(`{"tag":${JSON.stringify(tag)},"start":"${start}","end":"${end}","count":${n}}`);
    },
  });
}
