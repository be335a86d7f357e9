// Operations endpoints: health (liveness, readiness), Prometheus metrics, the monitor page and its
// data, the OpenAPI document, and redirects from Java Leaf's /cache and /db pages.
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { badParameter } from "./http-errors";
import type { AppContext, IdSources } from "./id-sources";
import { MONITOR_PAGE } from "./monitor-page";
import { monitorState, StoreRows } from "./monitor-state";
import { API, openApiDocument, routeOf } from "./openapi";
import { readiness } from "./readiness";
import { modeParam, type Query, readParam } from "./request-params";

/** Registers health, metrics, monitor and documentation endpoints. */
export function registerOpsRoutes(app: FastifyInstance, ctx: AppContext, sources: IdSources): void {
  app.get("/health/live", { exposeHeadRoute: true }, (_request, reply: FastifyReply) =>
    reply.send({ status: "up", state: ctx.state, uptimeMs: Date.now() - ctx.startedAt }),
  );

  app.route({
    ...routeOf(API.ready),
    exposeHeadRoute: true,
    handler: async (request: FastifyRequest<{ Querystring: Query }>, reply: FastifyReply) => {
      const mode = readParam(request.query, modeParam);
      // With several worker processes: each mode is ready only when it is in every worker.
      const server = ctx.workers ? await ctx.workers.readiness() : undefined;
      const all = server?.checks ?? readiness(ctx);
      let checks = all;
      if (mode !== undefined) {
        if (!(mode in all))
          throw badParameter(
            "mode",
            mode,
            `an enabled mode: ${Object.keys(all).join(", ") || "none"}`,
          );
        checks = { [mode]: all[mode]! };
      }
      const ready =
        Object.values(checks).every((c) => c.ready) &&
        (mode !== undefined || server === undefined || server.ready);
      if (!ready) reply.header("retry-after", "1");
      return reply
        .code(ready ? 200 : 503)
        .send(
          server
            ? { ready, state: ctx.state, checks, workers: server.workers }
            : { ready, state: ctx.state, checks },
        );
    },
  });

  app.get("/metrics", async (_request, reply: FastifyReply) => {
    // With several worker processes: the whole server's (see WorkerLink.metricsText).
    if (ctx.workers) {
      const { text, contentType } = await ctx.workers.metricsText();
      return reply.type(contentType).send(text);
    }
    const body = await ctx.metrics.registry.metrics();
    return reply.type(ctx.metrics.registry.contentType).send(body);
  });

  app.get("/openapi.json", (_request, reply: FastifyReply) =>
    reply.send(openApiDocument(ctx.version)),
  );

  if (ctx.config.server.monitor) {
    const storeRows = new StoreRows();
    app.get("/monitor", (_request, reply: FastifyReply) =>
      reply.type("text/html; charset=utf-8").send(MONITOR_PAGE),
    );
    app.get("/api/v1/monitor", async (_request, reply: FastifyReply) => {
      const workers = ctx.workers ? await ctx.workers.workers() : null;
      return reply.send(monitorState(ctx, workers));
    });
    app.get("/api/v1/monitor/store", async (_request, reply: FastifyReply) => {
      const { store } = sources.segment();
      const rows = await storeRows.rows(() => store.describeTags());
      return reply.send({ store: store.kind, rows });
    });
    // Java Leaf's two pages are now one.
    app.get("/cache", (_request, reply: FastifyReply) => reply.redirect("/monitor"));
    app.get("/db", (_request, reply: FastifyReply) => reply.redirect("/monitor#store"));
  }

  app.get("/", (_request, reply: FastifyReply) => {
    if (ctx.config.server.monitor) return reply.redirect("/monitor");
    return reply.send({ name: ctx.config.name, version: ctx.version, openapi: "/openapi.json" });
  });
}
