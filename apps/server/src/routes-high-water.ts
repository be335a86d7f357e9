// The admin API's view of this node's segment high-water marks (the end of the highest range it
// took per tag, kept in its data folder): list them, and forget one when an operator knows better.
// With several worker processes each keeps its own: the list is every worker's (per tag the
// highest), and a mark is forgotten in every worker.
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type { WorkerLink } from "./cluster-worker";
import type { IdSources } from "./id-sources";
import { readTag } from "./request-params";

/** Registers the high-water routes behind the admin API's `guard`. */
export function registerHighWaterRoutes(
  app: FastifyInstance,
  sources: IdSources,
  guard: { onRequest: (request: FastifyRequest) => Promise<void> },
  workers: () => WorkerLink | undefined = () => undefined,
): void {
  app.get("/api/v1/admin/high-water", guard, async (_request, reply: FastifyReply) => {
    const { generator } = sources.segment();
    const link = workers();
    if (link) {
      const byWorker = await link.highWaterMarks();
      const merged = new Map<string, { highWater: bigint; seen: bigint | null }>();
      for (const { marks } of byWorker) {
        for (const [tag, end, seen] of marks ?? []) {
          const before = merged.get(tag);
          const mark = BigInt(end);
          const saw = seen === null ? null : BigInt(seen);
          merged.set(tag, {
            highWater: before && before.highWater > mark ? before.highWater : mark,
            seen: before?.seen != null && (saw === null || before.seen > saw) ? before.seen : saw,
          });
        }
      }
      const marks = [...merged]
        .sort(([a], [b]) => (a < b ? -1 : 1))
        .map(([tag, m]) => ({
          tag,
          highWater: m.highWater.toString(),
          seen: m.seen?.toString() ?? null,
        }));
      const missing = byWorker.filter((w) => w.marks === undefined);
      return reply.send({
        count: marks.length,
        marks,
        workers: byWorker.map((w) => ({
          worker: w.slot,
          ...(w.missing ? { missing: w.missing } : { marks: w.marks!.length }),
        })),
        ...(missing.length > 0 ? { incomplete: true } : {}),
      });
    }
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
      const link = workers();
      if (link) {
        const answers = await link.forgetHighWater(tag);
        const forgottenMarks = answers.flatMap((a) =>
          a.forgotten != null ? [BigInt(a.forgotten)] : [],
        );
        const highest = forgottenMarks.reduce<bigint | null>(
          (m, v) => (m === null || v > m ? v : m),
          null,
        );
        return reply.send({
          tag,
          forgotten: highest === null ? null : highest.toString(),
          refused: answers.some((a) => a.refused === true),
          workers: answers.map((a) => ({
            worker: a.slot,
            ...(a.missing !== undefined
              ? { missing: a.missing }
              : { forgotten: a.forgotten ?? null, refused: a.refused === true }),
          })),
        });
      }
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
