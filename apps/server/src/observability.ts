// Wires the metrics to a fastify app: every answer is counted and timed by route pattern and status
// (and, for the id endpoints, by mode and tag for the monitor's activity); the once-a-second
// activity samples and the capacity checks run while the app does.
import type { FastifyInstance } from "fastify";
import type { AppContext } from "./id-sources";
import type { RouteConfig } from "./routes-ids";

/** Registers the hooks on `app`; call once, before the routes. */
export function registerObservability(app: FastifyInstance, ctx: AppContext): void {
  const { metrics } = ctx;
  metrics.bind(ctx, app.log);
  const namespace = ctx.config.redisSequence?.namespace ?? "";
  app.addHook("onResponse", (request, reply, done) => {
    const status = reply.statusCode;
    const route = request.routeOptions.url ?? "unmatched";
    metrics.observeRequest(request.method, route, status, reply.elapsedTime / 1000);
    const mode = (request.routeOptions.config as RouteConfig | undefined)?.mode;
    if (mode !== undefined) {
      // Per tag only once the tag has answered with ids, so a stream of unknown tags adds no rows.
      let tag = "";
      if (status < 400) {
        if (mode === "segment") {
          const params = request.params as { key?: string; tag?: string };
          tag = params.key ?? params.tag ?? "";
        } else if (mode === "redisSequence") tag = namespace;
      }
      metrics.activity.request(mode, tag);
    } else if (status >= 400) {
      metrics.activity.error(null, `HTTP ${status}`);
    }
    done();
  });
  app.addHook("onReady", (done) => {
    metrics.start();
    done();
  });
  app.addHook("onClose", (_instance, done) => {
    metrics.stop();
    done();
  });
}
