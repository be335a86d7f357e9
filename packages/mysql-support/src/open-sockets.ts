// Closing mysql2 pools in bounded time while their server does not answer (SIGSTOPped, cut off):
// mysql2's pool end queues each connection's quit behind its last statement, and a connection
// destroyed meanwhile (a statement timed out) leaves the pool's count of closed connections short,
// so the end waits for the server however long. And mysql2's destroy() only half-closes a socket
// (end()), which such a server never finishes: the sockets are kept here to be destroyed at once.

/** What is read of a socket (node's net.Socket, or a TLS one). */
interface WatchedSocket {
  readonly destroyed: boolean;
  destroy(): void;
  once(event: "close", listener: () => void): unknown;
}

/** How {@link OpenSockets.endWithin} ended: the pool's end answered, or the sockets were cut. */
export type PoolEndOutcome = "ended" | "cut";

/**
 * The sockets of the mysql2 connections an adapter used that are still open, for a close that ends
 * within a time limit ({@link endWithin}). Written without importing mysql2: a connection is read
 * by shape.
 */
export class OpenSockets {
  readonly #open = new Set<WatchedSocket>();

  /** Open sockets watched. */
  get size(): number {
    return this.#open.size;
  }

  /**
   * Keeps the socket of `connection` (a mysql2 connection, of the promise API or not, pooled or
   * not) until it closes. A connection without a socket (not connected yet) is skipped: call it
   * once the connection is handed out.
   */
  watch(connection: object): void {
    const socket = socketOf(connection);
    if (socket === undefined || socket.destroyed || this.#open.has(socket)) return;
    this.#open.add(socket);
    socket.once("close", () => this.#open.delete(socket));
  }

  /**
   * Waits up to `ms` for `ending` (a pool's `end()`, whose failure is ignored: the pool is closing
   * either way); when it has not settled by then, destroys every socket still watched. Resolves
   * "ended" or "cut"; never rejects. Nothing is sent again: a statement without an answer stays as
   * its caller reported it (sent once, outcome unknown).
   */
  async endWithin(ending: Promise<unknown>, ms: number): Promise<PoolEndOutcome> {
    let timer: ReturnType<typeof setTimeout> | undefined;
    const late = new Promise<"cut">((resolve) => {
      timer = setTimeout(() => resolve("cut"), ms);
    });
    const ended = ending.then(
      () => "ended" as const,
      () => "ended" as const,
    );
    const outcome = await Promise.race([ended, late]);
    clearTimeout(timer);
    if (outcome === "cut") this.destroyAll();
    return outcome;
  }

  /** Destroys every socket still watched, at once (no FIN handshake waited for). */
  destroyAll(): void {
    for (const socket of this.#open) socket.destroy();
    this.#open.clear();
  }
}

/**
 * The socket of a mysql2 connection: the promise API wraps the core connection as `connection`;
 * the core connection keeps its socket as `stream`.
 */
function socketOf(connection: object): WatchedSocket | undefined {
  const core = (connection as { connection?: unknown }).connection ?? connection;
  const stream = (core as { stream?: Partial<WatchedSocket> }).stream;
  if (
    typeof stream !== "object" ||
    stream === null ||
    typeof stream.destroy !== "function" ||
    typeof stream.once !== "function"
  ) {
    return undefined;
  }
  return stream as WatchedSocket;
}
