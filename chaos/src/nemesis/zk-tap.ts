// A TCP forwarder that reads the requests a ZooKeeper client sends, so that a fault can act at a
// point of the client's own protocol (`same-identity` cuts a start's link only once it has read
// the marker it waits for). It sits in front of the server's TcpProxy (the link a fault cuts) and
// forwards every byte both ways unchanged; a close on one side closes the other.
//
// ZooKeeper's wire format: each frame is a 4-byte length and that many bytes; a connection's first
// frame from the client is its ConnectRequest, every later one a RequestHeader (xid, type, both
// 32-bit) and the request, which for getData (4) and exists (3) starts with the path (32-bit
// length, UTF-8).
import net from "node:net";

/** ZooKeeper's request types the tap names (OpCode in the Java client). */
export const ZK_OP = { exists: 3, getData: 4 } as const;

/** Frames longer than this are not ZooKeeper's requests: parsing stops for that connection. */
const MAX_FRAME = 16 * 1024 * 1024;

/** A request seen: its type, and its path for getData and exists. */
export type ZkRequestListener = (type: number, path: string | undefined) => void;

/** The tap. Start it with {@link ZkTap.start}; the client connects to its `port`. */
export class ZkTap {
  private listener: ZkRequestListener | undefined;
  private readonly sockets = new Set<net.Socket>();

  private constructor(
    private readonly server: net.Server,
    readonly port: number,
  ) {}

  /** Listens on 127.0.0.1 (a free port) and forwards to `targetPort` on 127.0.0.1. */
  static async start(targetPort: number): Promise<ZkTap> {
    const server = net.createServer();
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen({ host: "127.0.0.1", port: 0 }, () => {
        server.off("error", reject);
        resolve();
      });
    });
    const address = server.address();
    if (typeof address !== "object" || address === null) {
      server.close();
      throw new Error("[leaf] [nemesis] the ZooKeeper tap got no port");
    }
    const tap = new ZkTap(server, address.port);
    server.on("connection", (client) => tap.accept(client, targetPort));
    return tap;
  }

  /** Calls `listener` for every request a client sends from now on (one listener; undefined: none). */
  onRequest(listener: ZkRequestListener | undefined): void {
    this.listener = listener;
  }

  /** Stops listening and closes every connection. */
  async close(): Promise<void> {
    for (const socket of this.sockets) socket.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private accept(client: net.Socket, targetPort: number): void {
    const upstream = net.connect({ host: "127.0.0.1", port: targetPort });
    for (const socket of [client, upstream]) {
      this.sockets.add(socket);
      socket.on("close", () => {
        this.sockets.delete(socket);
        client.destroy();
        upstream.destroy();
      });
      socket.on("error", () => undefined);
    }
    client.pipe(upstream);
    upstream.pipe(client);
    let pending: Buffer = Buffer.alloc(0);
    let first = true;
    let broken = false;
    client.on("data", (chunk: Buffer) => {
      if (broken) return;
      pending = pending.length === 0 ? chunk : Buffer.concat([pending, chunk]);
      while (pending.length >= 4) {
        const length = pending.readInt32BE(0);
        if (length < 0 || length > MAX_FRAME) {
          broken = true;
          return;
        }
        if (pending.length < 4 + length) break;
        const frame = pending.subarray(4, 4 + length);
        pending = pending.subarray(4 + length);
        if (first) {
          first = false;
          continue;
        }
        if (frame.length < 8) continue;
        const type = frame.readInt32BE(4);
        let path: string | undefined;
        if ((type === ZK_OP.exists || type === ZK_OP.getData) && frame.length >= 12) {
          const size = frame.readInt32BE(8);
          if (size >= 0 && 12 + size <= frame.length) {
            path = frame.toString("utf8", 12, 12 + size);
          }
        }
        this.listener?.(type, path);
      }
    });
  }
}
