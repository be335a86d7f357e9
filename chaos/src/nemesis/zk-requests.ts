// Reading the requests a ZooKeeper client sends through a link's TcpProxy (the test kit's
// onClientData), so that a fault can act at a point of the client's own protocol
// (`same-identity` cuts a start's link only once it has read the marker it waits for).
//
// ZooKeeper's wire format: each frame is a 4-byte length and that many bytes; a connection's first
// frame from the client is its ConnectRequest, every later one a RequestHeader (xid, type, both
// 32-bit) and the request, which for getData (4) and exists (3) starts with the path (32-bit
// length, UTF-8).
import type { TcpProxy } from "@leaf/testkit";

/** ZooKeeper's request types the reader names (OpCode in the Java client). */
export const ZK_OP = { exists: 3, getData: 4 } as const;

/** Frames longer than this are not ZooKeeper's requests: parsing stops for that connection. */
const MAX_FRAME = 16 * 1024 * 1024;

/** A request seen: its type, and its path for getData and exists. */
export type ZkRequestListener = (type: number, path: string | undefined) => void;

/** What is known of one connection's stream so far. */
interface Stream {
  pending: Buffer;
  /** The ConnectRequest (the first frame) has not been passed yet. */
  first: boolean;
  /** Not ZooKeeper's framing: nothing more is read from it. */
  broken: boolean;
}

/**
 * Calls `listener` for every request a client sends through `proxy` from now on (on connections
 * opened from now on: a connection's frames are read from its first byte). Returns the function
 * that stops it. One reader per proxy.
 */
export function readZkRequests(proxy: TcpProxy, listener: ZkRequestListener): () => void {
  const seenBefore = proxy.connections;
  const streams = new Map<number, Stream>();
  proxy.onClientData((chunk, connection) => {
    if (connection <= seenBefore) return;
    let stream = streams.get(connection);
    if (stream === undefined) {
      stream = { pending: Buffer.alloc(0), first: true, broken: false };
      streams.set(connection, stream);
    }
    if (stream.broken) return;
    stream.pending = stream.pending.length === 0 ? chunk : Buffer.concat([stream.pending, chunk]);
    while (stream.pending.length >= 4) {
      const length = stream.pending.readInt32BE(0);
      if (length < 0 || length > MAX_FRAME) {
        stream.broken = true;
        stream.pending = Buffer.alloc(0);
        return;
      }
      if (stream.pending.length < 4 + length) break;
      const frame = stream.pending.subarray(4, 4 + length);
      stream.pending = stream.pending.subarray(4 + length);
      if (stream.first) {
        stream.first = false;
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
      listener(type, path);
    }
  });
  return () => proxy.onClientData(undefined);
}
