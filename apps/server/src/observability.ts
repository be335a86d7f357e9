// Wires the metrics to a fastify app: every answer is counted and timed by route pattern and status
// (and, for the id endpoints, by mode and tag for the monitor's activity); the once-a-second
// activity samples and the capacity checks run while the app does. Each route gets its own
// counting hook, with its series and mode found once when it is registered: the request path
// only adds numbers.
import type { FastifyInstance, onResponseHookHandler } from "fastify";
import type { Counted } from "./activity";
import type { AppContext } from "./id-sources";
import type { ServerMetrics } from "./metrics";
import type { RouteConfig } from "./routes-ids";

/** Registers the hooks on `app`; call once, before the routes. */
export function registerObservability(app: FastifyInstance, ctx: AppContext): void {
  const { metrics } = ctx;
  metrics.bind(ctx, app.log);
  const namespace = ctx.config.redisSequence?.namespace ?? "";
  app.addHook("onRoute", (route) => {
    const mode = (route.config as RouteConfig | undefined)?.mode;
    const own = route.onResponse === undefined ? [] : [route.onResponse].flat();
    route.onResponse = [...own, countAnswers(metrics, route.url, mode, namespace)];
  });
  // Requests no route matched (404s, and requests refused before routing).
  const unmatched = countAnswers(metrics, "unmatched", undefined, namespace);
  app.addHook("onResponse", function onUnmatched(request, reply, done) {
    if (request.is404) return unmatched.call(this, request, reply, done);
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

/** The onResponse hook that counts the answers of `route` (and of `mode`'s ids, if any). */
function countAnswers(
  metrics: ServerMetrics,
  route: string,
  mode: string | undefined,
  namespace: string,
): onResponseHookHandler {
  const answers = metrics.answers.route(route);
  const { activity } = metrics;
  if (mode === undefined) {
    return (request, reply, done) => {
      const status = reply.statusCode;
      answers.add(request.method, status, reply.elapsedTime / 1000);
      if (status >= 400) activity.error(null, `HTTP ${status}`);
      done();
    };
  }
  // The activity counts by tag, created on first use: per tag only once the tag has answered with
  // ids, so a stream of unknown tags adds no rows.
  const counts = new Map<string, Counted>();
  const countOf = (tag: string): Counted => {
    let count = counts.get(tag);
    if (count === undefined) {
      count = activity.requestCount(mode, tag);
      counts.set(tag, count);
    }
    return count;
  };
  return (request, reply, done) => {
    const status = reply.statusCode;
    answers.add(request.method, status, reply.elapsedTime / 1000);
    let tag = "";
    if (status < 400) {
      if (mode === "segment") {
        const params = request.params as { key?: string; tag?: string };
        tag = params.key ?? params.tag ?? "";
      } else if (mode === "redisSequence") tag = namespace;
    }
    countOf(tag).n++;
    done();
  };
}
