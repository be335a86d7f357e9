// Starts a server: the modes first (with the port to be bound as the node's identity), then the
// port, so that an open port always means "ready" to a load balancer's TCP check. Stopping drains:
// readiness turns false, requests keep being answered (with `Connection: close`) for
// server.drainMs, then the port closes without resetting a connection (graceful-stop.ts), each
// connection gets its last answer, and the modes close (lease released).
import net from "node:net";
import type { FastifyInstance } from "fastify";
import pkg from "../package.json";
import { type BuildAppOptions, buildApp } from "./app";
import type { WorkerLink } from "./cluster-worker";
import type { ServerConfig } from "./config";
import { ConnectionTracker } from "./graceful-stop";
import { HttpCodes, HttpError } from "./http-errors";
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
   * Graceful stop: readiness turns false at once and requests are still answered, each with
   * `Connection: close`, for `drainMs` (default server.drainMs) so that load balancers move away;
   * then the port closes (no connection reset), every open connection gets its next answer with
   * `Connection: close` and is closed, and the modes close (last timestamp report, lease
   * released, store closed). A request that still arrives then is answered 503 SHUTTING_DOWN with
   * `Retry-After`. Rejects when the part after the drain takes longer than
   * server.shutdownTimeoutMs. Idempotent: a second call returns the first call's promise.
   */
  close(options?: { drainMs?: number }): Promise<void>;
}

/** Options of {@link startServer}. */
export interface StartServerOptions extends BuildAppOptions {
  /**
   * This process is one worker of several (server.workers; set by the CLI's worker processes):
   * the port is shared with its siblings and given by the primary, the node identity, the lock and
   * the high-water folder are the worker's own, and readiness, metrics and the monitor answer for
   * every worker.
   */
  worker?: WorkerLink;
}

/**
 * Starts every enabled mode, then listens on the configured host and port. When a mode cannot
 * start, the error (a LeafError naming the mode) is rethrown and the port is never opened; when the
 * port cannot be bound, the modes are closed again and the error names server.port.
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
    workers: options.worker,
  };
  options.worker?.attach(ctx);
  metrics.attach(() => ctx.services);
  const app = buildApp(ctx, options);
  const connections = new ConnectionTracker(app.server);
  // Once the modes close, a request that still arrives gets the project's answer (Java Leaf's text
  // on its paths), never fastify's generic 503.
  // (Both hooks run on every request: callback hooks, which cost less than async ones.)
  app.addHook("onRequest", (_request, _reply, done) => {
    if (!ctx.modesClosing) return done();
    done(
      new HttpError(
        503,
        HttpCodes.SHUTTING_DOWN,
        "[leaf] [server] the server is shutting down; ask another node",
      ),
    );
  });
  // While draining, and once the port is closed, every answer asks the client to close its
  // keep-alive connection, so that its next request opens a connection to another node instead of
  // finding this one gone. (Between the two, while the port closes, clients keep their
  // connections.)
  app.addHook("onSend", (_request, reply, payload, done) => {
    if (ctx.state === "draining" || ctx.portClosed) reply.header("connection", "close");
    done(null, payload);
  });
  const { host } = config.server;
  // The node's identity includes the port, so the port must be known before the modes start. Port 0
  // (tests) takes a free port first; the short window before it is bound again is harmless there.
  // A worker process is given its port by the primary, which checked it; its siblings serve it.
  const worker = options.worker;
  const port =
    config.server.port === 0 && worker === undefined
      ? await pickFreePort(host)
      : config.server.port;
  if (worker === undefined) await assertPortFree(host, port);
  let services: LeafServices;
  try {
    services = await startServices({
      config,
      metrics,
      logger: app.log,
      port,
      worker: worker && {
        slot: worker.slot,
        count: worker.count,
        remoteStore: (kind) => worker.remoteStore(kind),
      },
    });
  } catch (error) {
    ctx.state = "stopping";
    await app.close().catch(() => {});
    throw error;
  }
  ctx.services = services;
  try {
    await app.listen({ host, port });
  } catch (error) {
    ctx.state = "stopping";
    await app.close().catch(() => {});
    await services.close().catch(() => {});
    throw portError(error, host, port);
  }
  ctx.state = "running";
  const shownHost = host === "0.0.0.0" || host === "::" ? "127.0.0.1" : host;
  let closing: Promise<void> | undefined;
  return {
    app,
    url: `http://${shownHost.includes(":") ? `[${shownHost}]` : shownHost}:${port}`,
    port,
    services,
    context: ctx,
    close(closeOptions = {}) {
      closing ??= shutdown(
        ctx,
        app,
        services,
        connections,
        closeOptions.drainMs ?? config.server.drainMs,
      );
      return closing;
    },
  };
}

/** A free TCP port on `host`, found by binding port 0 and closing again. */
export function pickFreePort(host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = net.createServer();
    probe.once("error", (error) => reject(portError(error, host, 0)));
    probe.listen({ host, port: 0, exclusive: true }, () => {
      const address = probe.address();
      const port = typeof address === "object" && address !== null ? address.port : 0;
      probe.close(() => resolve(port));
    });
  });
}

/**
 * Fails fast, before the modes take a worker id or load ranges, when something already listens on
 * the port. It connects rather than binds: binding to test would open the port for a moment, and a
 * load balancer's probe landing then would be reset. (A port taken in another way is still caught
 * by listen() itself, after which the modes are closed again.)
 */
export function assertPortFree(host: string, port: number): Promise<void> {
  const target = host === "0.0.0.0" || host === "::" ? "127.0.0.1" : host;
  return new Promise((resolve, reject) => {
    const socket = net.connect({ host: target, port });
    socket.setTimeout(1000);
    const done = (inUse: boolean) => {
      socket.destroy();
      if (inUse) {
        const error = Object.assign(new Error(`${target}:${port} accepts connections`), {
          code: "EADDRINUSE",
        });
        reject(portError(error, host, port));
      } else resolve();
    };
    socket.once("connect", () => done(true));
    socket.once("timeout", () => done(false));
    socket.once("error", () => done(false));
  });
}

/** A bind error as an operator reads it: which address, and which key to change. */
function portError(error: unknown, host: string, port: number): Error {
  const code = (error as NodeJS.ErrnoException).code;
  const where = `${host}:${port}`;
  if (code === "EADDRINUSE") {
    return new Error(
      `[leaf] [server] port ${port} on ${host} is already in use (another Leaf server, or another program); ` +
        `stop it, or choose another port with server.port (LEAF_SERVER_PORT)`,
      { cause: error },
    );
  }
  if (code === "EADDRNOTAVAIL") {
    return new Error(
      `[leaf] [server] cannot listen on ${where}: ${host} is not an address of this machine; ` +
        `set server.host (LEAF_SERVER_HOST) to one of its addresses, 0.0.0.0 for all, or 127.0.0.1`,
      { cause: error },
    );
  }
  if (code === "EACCES") {
    return new Error(
      `[leaf] [server] not allowed to listen on ${where} (ports below 1024 need privileges); ` +
        `choose a port of 1024 or more with server.port (LEAF_SERVER_PORT)`,
      { cause: error },
    );
  }
  return new Error(
    `[leaf] [server] cannot listen on ${where}: ${(error as Error).message}; check server.host and server.port`,
    { cause: error },
  );
}

async function shutdown(
  ctx: AppContext,
  app: FastifyInstance,
  services: LeafServices,
  connections: ConnectionTracker,
  drainMs: number,
): Promise<void> {
  if (drainMs > 0) {
    ctx.state = "draining";
    ctx.drainEndsAt = Date.now() + drainMs;
    await new Promise((resolve) => setTimeout(resolve, drainMs));
  }
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
        await connections.settled();
        // Several worker processes share the port: they close it together (one closing early
        // would send its clients, told to close their connections, to a sibling about to close).
        await ctx.workers?.passStep("settled");
        await connections.closeListener();
        await ctx.workers?.passStep("closed");
        ctx.portClosed = true;
        await connections.drained();
        ctx.modesClosing = true;
        await services.close();
        await app.close();
      })(),
      timeout,
    ]);
  } finally {
    clearTimeout(timer);
  }
}
