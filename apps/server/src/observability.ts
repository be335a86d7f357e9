// Wires the metrics to a fastify app: every answer is counted and timed by route pattern and status
// (and, for the id endpoints, by mode and tag for the monitor's activity); the once-a-second
// activity samples and the capacity checks run while the app does. Each route gets its own
// counting hook, with its series and mode found once when it is registered: the request path
// only adds numbers.
import type { FastifyInstance, FastifyRequest } from "fastify";
import type { Activity, Counted } from "./activity";
import type { RouteAnswers } from "./answer-metrics";
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
    const counter = new AnswerCounter(metrics, route.url, mode, namespace);
    const own = route.onResponse === undefined ? [] : [route.onResponse].flat();
    route.onResponse = [
      ...own,
      (request, reply, done) => {
        counter.count(request.method, reply.statusCode, reply.elapsedTime / 1000, tagOf(request));
        done();
      },
    ];
  });
  // Requests no route matched (404s, and requests refused before routing).
  const unmatched = new AnswerCounter(metrics, "unmatched", undefined, namespace);
  app.addHook("onResponse", (request, reply, done) => {
    if (request.is404) unmatched.count(request.method, reply.statusCode, reply.elapsedTime / 1000);
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

/** The segment tag a request names in its path (`:key` of Java Leaf's path, `:tag` of the API). */
function tagOf(request: FastifyRequest): string | undefined {
  const params = request.params as { key?: string; tag?: string } | undefined;
  return params?.key ?? params?.tag;
}

/**
 * Counts the answers of one route: its http_* series and, for an id route, the monitor's requests
 * of its mode and tag. Made once per route; {@link count} only adds numbers.
 */
export class AnswerCounter {
  private readonly answers: RouteAnswers;
  private readonly activity: Activity;
  // The activity counts by tag, created on first use: per tag only once the tag has answered with
  // ids, so a stream of unknown tags adds no rows.
  private readonly requests = new Map<string, Counted>();

  constructor(
    metrics: ServerMetrics,
    route: string,
    private readonly mode: string | undefined,
    private readonly namespace: string,
  ) {
    this.answers = metrics.answers.route(route);
    this.activity = metrics.activity;
  }

  /** One answer of `status` after `seconds`; `segmentTag`: the tag the request named, if any. */
  count(method: string, status: number, seconds: number, segmentTag?: string): void {
    this.answers.add(method, status, seconds);
    if (this.mode === undefined) {
      if (status >= 400) this.activity.error(null, `HTTP ${status}`);
      return;
    }
    let tag = "";
    if (status < 400) {
      if (this.mode === "segment") tag = segmentTag ?? "";
      else if (this.mode === "redisSequence") tag = this.namespace;
    }
    let requests = this.requests.get(tag);
    if (requests === undefined) {
      requests = this.activity.requestCount(this.mode, tag);
      this.requests.set(tag, requests);
    }
    requests.n++;
  }
}
