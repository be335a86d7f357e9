// The fastify application: every route, one error handler that turns failures into meaningful
// statuses (Java Leaf's paths keep their plain-text bodies), and a 404 that says where to look.
import { SequenceIdFormat } from "@leaf/redis-sequence";
import Fastify, {
  type FastifyInstance,
  type FastifyReply,
  type FastifyServerOptions,
  LogController,
} from "fastify";
import { AccessTokens, AdminToken, hideToken, requestLogFields } from "./access-tokens";
import { fastIdPaths, NO_STORE, putFastPathFirst } from "./fast-paths";
import { errorText, HttpCodes, toErrorBody } from "./http-errors";
import { type AppContext, IdSources } from "./id-sources";
import { registerObservability } from "./observability";
import { lazyRequestLogger } from "./request-logger";
import { answerClientError, answerWrongMethod, registerRouteRules } from "./route-rules";
import { registerAdminRoutes } from "./routes-admin";
import { type RouteConfig, registerIdRoutes, wantsJson } from "./routes-ids";
import { registerOpsRoutes } from "./routes-ops";
import { registerRangeRoutes } from "./routes-ranges";

/** Options of {@link buildApp}. */
export interface BuildAppOptions {
  /** fastify's logger option (default: pino at the configured level); `false` for none. */
  logger?: FastifyServerOptions["logger"];
}

const ROUTES = new WeakMap<FastifyInstance, Array<{ method: string; url: string }>>();

/** Every route of an app built by {@link buildApp}: method and path (HEAD routes left out). */
export function listRoutes(app: FastifyInstance): Array<{ method: string; url: string }> {
  return ROUTES.get(app) ?? [];
}

/** Builds the application for `ctx`. Routes answer "starting" until `ctx.services` is set. */
export function buildApp(ctx: AppContext, options: BuildAppOptions = {}): FastifyInstance {
  const { config } = ctx;
  const app = Fastify({
    logger: options.logger ?? {
      level: config.logLevel,
      serializers: { req: requestLogFields },
    },
    logController: new LogController({ disableRequestLogging: !config.server.requestLog }),
    childLoggerFactory: lazyRequestLogger,
    routerOptions: { maxParamLength: 2048 },
    bodyLimit: 64 * 1024,
    // The stop closes connections itself (graceful-stop.ts) and answers SHUTTING_DOWN in the
    // project's shape: fastify's generic 503 and its closing of idle connections are not used.
    return503OnClosing: false,
    // A HEAD on an id endpoint would take an id and throw it away: only the health checks have one.
    exposeHeadRoutes: false,
    forceCloseConnections: false,
    // Node refuses some requests before fastify has one (431 headers too large, bad HTTP).
    clientErrorHandler: answerClientError,
    frameworkErrors: (error, _request, reply) => {
      const body = toErrorBody(error);
      (reply as FastifyReply).code(body.status).send(body);
    },
  });
  // No answer may be kept by a cache between the server and its clients: a cached id, range or
  // batch would be handed out again (nginx's proxy_cache with `proxy_cache_valid 200 1m` served one
  // snowflake id twice). onSend, so that errors and 404s are marked too.
  app.addHook("onSend", (_request, reply, payload, done) => {
    reply.header("cache-control", NO_STORE);
    done(null, payload);
  });
  const sources = new IdSources(ctx);
  // The single-id Java paths' common case is answered before fastify routes it (fast-paths.ts).
  const fast = fastIdPaths(ctx, sources);
  if (fast !== undefined) putFastPathFirst(app.server, fast);
  const tokens = config.server.accessTokens
    ? new AccessTokens(config.server.accessTokens)
    : undefined;
  const admin = config.server.adminToken ? new AdminToken(config.server.adminToken) : undefined;
  const sequenceFormat = config.redisSequence
    ? new SequenceIdFormat({ timeZone: config.redisSequence.timeZone })
    : undefined;
  const lastLogged = new Map<string, number>();
  const rules = registerRouteRules(app);
  const routes: Array<{ method: string; url: string }> = [];
  ROUTES.set(app, routes);
  app.addHook("onRoute", (route) => {
    for (const method of [route.method].flat()) {
      if (method !== "HEAD") routes.push({ method, url: route.url });
    }
  });

  app.setErrorHandler((error, request, reply) => {
    const body = toErrorBody(error);
    const route = (request.routeOptions.config ?? {}) as RouteConfig;
    if (body.code === HttpCodes.INTERNAL) {
      request.log.error(
        { err: error, url: hideToken(request.url) },
        "unexpected error while answering a request",
      );
    } else if (body.status >= 500) {
      // Outages answer many requests with the same error: log each code at most once a second.
      const now = Date.now();
      if ((lastLogged.get(body.code) ?? 0) + 1000 <= now) {
        lastLogged.set(body.code, now);
        request.log.warn({ code: body.code, url: hideToken(request.url) }, body.message);
      }
    }
    if (route.mode) ctx.metrics.requestErrors.inc({ mode: route.mode, code: body.code });
    reply.code(body.status);
    if (body.status === 401) reply.header("www-authenticate", 'Bearer realm="leaf"');
    if (body.status === 503) reply.header("retry-after", "1");
    if (route.java && request.url.startsWith("/decodeSnowflakeId")) {
      // Java Leaf's field, beside ours.
      return reply.send({ errorMsg: body.message, ...body });
    }
    if (route.java && !wantsJson(request)) {
      return reply.type("text/plain; charset=utf-8").send(errorText(body));
    }
    return reply.send(body);
  });

  app.setNotFoundHandler((request, reply) => {
    if (answerWrongMethod(rules, request, reply)) return;
    reply.code(404).send({
      status: 404,
      code: HttpCodes.NOT_FOUND,
      message: `[leaf] [server] no route for ${request.method} ${request.url.split("?")[0]!.slice(0, 200)}; the API is described at /openapi.json`,
    });
  });

  registerObservability(app, ctx);
  registerIdRoutes(app, ctx, sources, tokens, () => sequenceFormat);
  registerRangeRoutes(app, sources, ctx.metrics, tokens);
  registerAdminRoutes(app, sources, admin, () => ctx.workers);
  registerOpsRoutes(app, ctx, sources);
  return app;
}
