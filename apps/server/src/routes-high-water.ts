// The admin API's view of this node's segment high-water marks (the end of the highest range it
// took per tag, kept in its data folder): list them, and forget one when an operator knows better.
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type { IdSources } from "./id-sources";
import { readTag } from "./request-params";

/** Registers the high-water routes behind the admin API's `guard`. */
export function registerHighWaterRoutes(
  app: FastifyInstance,
  sources: IdSources,
  guard: { onRequest: (request: FastifyRequest) => Promise<void> },
): void {
  app.get("/api/v1/admin/high-water", guard, async (_request, reply: FastifyReply) => {
    const { generator } = sources.segment();
    const seen = generator.observedMaxIds();
    const marks = [...generator.highWaterMarks()]
      .sort(([a], [b]) => (a < b ? -1 : 1))
      .map(([tag, end]) => ({
        tag,
        highWater: end.toString(),
        seen: seen.get(tag)?.toString() ?? null,
      }));
    return reply.send({ count: marks.length, marks });
  });

  app.delete<{ Params: { tag: string } }>(
    "/api/v1/admin/high-water/:tag",
    guard,
    async (request, reply: FastifyReply) => {
      const { generator } = sources.segment();
      const tag = readTag(request.params.tag);
      const forgotten = await generator.forgetHighWater(tag);
      const snapshot = generator.snapshot(tag);
      return reply.send({
        tag,
        forgotten: forgotten === undefined ? null : forgotten.toString(),
        refused: snapshot?.refused != null,
      });
    },
  );
}
