// A stop that drops no request. After the drain (readiness false, every answer asking the client to
// close its connection), the port is closed in a way that resets no connection: first the server
// stops asking clients to reconnect, so that they stay on the connections they have and none is
// left half-open in the kernel's accept queue (closing a listening socket resets those); then the
// listening socket alone is closed; then each connection gets its next answer with `Connection:
// close` and is closed after it, and one that sends nothing is closed once idle.
import type { Server, ServerResponse } from "node:http";
import net from "node:net";
import { performance } from "node:perf_hooks";

/** The port closes once no connection was accepted for this long (clients settled). */
export const SETTLE_QUIET_MS = 50;
/** ... or after this long, whatever the clients do. */
export const SETTLE_MAX_MS = 1000;
/** After the port closed, a connection without a request in flight for this long is closed. */
export const IDLE_CLOSE_MS = 500;
/** A connection asked to close (FIN sent) that the client keeps open is destroyed after this. */
const END_GRACE_MS = 1000;
const TICK_MS = 10;
/**
 * A tick this much later than asked means the event loop was held up: the bytes of a request may
 * be waiting to be read, so no connection is judged idle until a tick comes on time.
 */
const LATE_MS = 50;

interface Tracked {
  /** Requests received and not yet answered. */
  active: number;
  /** ms (performance clock) of the accept or of the last answer. */
  lastActiveAt: number;
  ended: boolean;
}

const TRACKED = Symbol("tracked connection");

/** A response and the connection it answers on. */
type TrackedResponse = ServerResponse & { [TRACKED]?: Tracked };

/** A response's 'close' listener: its request is no longer in flight. */
function answered(this: TrackedResponse): void {
  const tracked = this[TRACKED]!;
  tracked.active--;
  tracked.lastActiveAt = performance.now();
}

/** Follows every connection of an HTTP server: requests in flight and last activity. */
export class ConnectionTracker {
  private readonly sockets = new Map<net.Socket, Tracked>();
  private lastAcceptAt = 0;

  constructor(private readonly server: Server) {
    server.on("connection", (socket: net.Socket) => {
      const now = performance.now();
      this.lastAcceptAt = now;
      this.sockets.set(socket, { active: 0, lastActiveAt: now, ended: false });
      socket.once("close", () => this.sockets.delete(socket));
    });
    server.on("request", (request, response: TrackedResponse) => {
      const tracked = this.sockets.get(request.socket);
      if (tracked === undefined) return;
      // No clock read: while a request is in flight the connection is not idle whatever its
      // stamp, and its answer stamps it (`answered`).
      tracked.active++;
      // One shared listener, not a closure with `once` per request: this runs on every request.
      response[TRACKED] = tracked;
      response.on("close", answered);
    });
  }

  /** Open connections. */
  get open(): number {
    return this.sockets.size;
  }

  /**
   * Resolves once no connection was accepted for {@link SETTLE_QUIET_MS}, or after
   * {@link SETTLE_MAX_MS}: clients that were told to reconnect have done so.
   */
  async settled(): Promise<void> {
    const until = performance.now() + SETTLE_MAX_MS;
    while (performance.now() < until && performance.now() - this.lastAcceptAt < SETTLE_QUIET_MS) {
      await sleep(TICK_MS);
    }
  }

  /**
   * Closes the listening socket only: connections already accepted stay open. (http.Server's
   * close() would also destroy every connection without a request in flight, resetting one whose
   * request is on its way.)
   */
  async closeListener(): Promise<void> {
    // In the check phase, right after the poll phase accepted every connection that had arrived:
    // the accept queue, whose connections a closing listener resets, is as short as it gets.
    await new Promise<void>((resolve) => setImmediate(resolve));
    if (!this.server.listening) return;
    // Bun's http.Server is not built on net.Server (net's close() fails on it: no
    // _emitCloseIfDrained); its own close() stops the listener and leaves open connections be.
    if (process.versions.bun !== undefined) this.server.close();
    else net.Server.prototype.close.call(this.server);
  }

  /**
   * Resolves once every connection is closed: those answering close after their answer (it carries
   * `Connection: close`), those idle for {@link IDLE_CLOSE_MS} are ended (FIN, nothing unread).
   */
  async drained(): Promise<void> {
    let last = performance.now();
    while (this.sockets.size > 0) {
      await sleep(TICK_MS);
      const now = performance.now();
      const late = now - last > TICK_MS + LATE_MS;
      last = now;
      if (late) continue;
      for (const [socket, tracked] of this.sockets) {
        if (tracked.ended || tracked.active > 0 || now - tracked.lastActiveAt < IDLE_CLOSE_MS) {
          continue;
        }
        tracked.ended = true;
        socket.end();
        setTimeout(() => socket.destroy(), END_GRACE_MS).unref();
      }
    }
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
