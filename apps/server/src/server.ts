// Starts a server: listen first (liveness answers, ids say "starting"), then start the modes with
// the real port as the node's identity. Closing stops accepting, lets in-flight requests finish,
// then writes the last timestamp report and releases the lease.
import type { FastifyInstance } from "fastify";
import pkg from "../package.json";
import { type BuildAppOptions, buildApp } from "./app";
import type { ServerConfig } from "./config";
import type { AppContext } from "./id-sources";
import { type LeafServices, startServices } from "./leaf-services";
import { ServerMetrics } from "./metrics";

/** The server's version (from its package.json). */
export const VERSION: string = pkg.version;

/** A running server. */
export interface LeafServer {
  app: FastifyInstance;
  /** `http://host:port`, with the port actually bound. */
  url: string;
  port: number;
  services: LeafServices;
  context: AppContext;
  /**
   * Graceful stop: refuses new requests (503), waits for in-flight ones, then closes the modes (last
   * timestamp report, lease released, store closed). Rejects when it takes longer than
   * server.shutdownTimeoutMs. Idempotent.
   */
  close(): Promise<void>;
}

/** Options of {@link startServer}. */
export type StartServerOptions = BuildAppOptions;

/**
 * Listens on the configured host and port, then starts every enabled mode. When a mode cannot
 * start, the server is closed again and the error (a LeafError naming the mode) is rethrown.
 */
export async function startServer(
  config: ServerConfig,
  options: StartServerOptions = {},
): Promise<LeafServer> {
  const metrics = new ServerMetrics();
  const ctx: AppContext = {
    config,
    metrics,
    services: undefined,
    state: "starting",
    startedAt: Date.now(),
    version: VERSION,
  };
  metrics.attach(() => ctx.services);
  const app = buildApp(ctx, options);
  await app.listen({ host: config.server.host, port: config.server.port });
  const address = app.server.address();
  const port = typeof address === "object" && address !== null ? address.port : config.server.port;
  let services: LeafServices;
  try {
    services = await startServices({ config, metrics, logger: app.log, port });
  } catch (error) {
    ctx.state = "stopping";
    await app.close().catch(() => {});
    throw error;
  }
  ctx.services = services;
  ctx.state = "running";
  const host = config.server.host.includes(":") ? `[${config.server.host}]` : config.server.host;
  const shownHost = host === "0.0.0.0" || host === "[::]" ? "127.0.0.1" : host;
  let closing: Promise<void> | undefined;
  return {
    app,
    url: `http://${shownHost}:${port}`,
    port,
    services,
    context: ctx,
    close() {
      closing ??= shutdown(ctx, app, services);
      return closing;
    },
  };
}

async function shutdown(
  ctx: AppContext,
  app: FastifyInstance,
  services: LeafServices,
): Promise<void> {
  const limit = ctx.config.server.shutdownTimeoutMs;
  ctx.state = "stopping";
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () =>
        reject(
          new Error(
            `[leaf] [server] shutdown took longer than server.shutdownTimeoutMs (${limit} ms); exiting anyway`,
          ),
        ),
      limit,
    );
    timer.unref();
  });
  try {
    await Promise.race([
      (async () => {
        const closed = app.close();
        // A keep-alive connection whose request finished after close() began would hold the
        // server open until its keep-alive timeout: close such connections as they go idle.
        const sweeper = setInterval(() => app.server.closeIdleConnections(), 50);
        try {
          await closed;
        } finally {
          clearInterval(sweeper);
        }
        await services.close();
      })(),
      timeout,
    ]);
  } finally {
    clearTimeout(timer);
  }
}
