// A TCP proxy on 127.0.0.1 between the servers and MariaDB that makes the network slow: every chunk,
// in both directions, is held for a set delay (order kept), or everything is held while paused.
import net from "node:net";

/** Bytes queued in one direction before the proxy stops reading that side. */
const HIGH_WATER = 4 * 1024 * 1024;

interface Held {
  chunk: Buffer;
  releaseAt: number;
}

/** One direction of one connection: chunks wait in order until their time comes. */
class Pipe {
  private readonly queue: Held[] = [];
  private queuedBytes = 0;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly from: net.Socket,
    private readonly to: net.Socket,
    private readonly proxy: SlowProxy,
  ) {
    from.on("data", (chunk: Buffer) => {
      this.queue.push({ chunk, releaseAt: performance.now() + proxy.delayMs });
      this.queuedBytes += chunk.length;
      if (proxy.delayMs > 0) proxy.delayedChunks++;
      if (this.queuedBytes > HIGH_WATER) from.pause();
      this.pump();
    });
  }

  /** Sends every chunk whose time has come, unless the proxy is paused; re-arms for the next. */
  pump(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    if (this.proxy.paused) return;
    const now = performance.now();
    while (this.queue.length > 0 && this.queue[0]!.releaseAt <= now) {
      const { chunk } = this.queue.shift()!;
      this.queuedBytes -= chunk.length;
      if (!this.to.destroyed) this.to.write(chunk);
    }
    if (this.queuedBytes <= HIGH_WATER && this.from.isPaused()) this.from.resume();
    if (this.queue.length > 0) {
      this.timer = setTimeout(() => this.pump(), Math.max(1, this.queue[0]!.releaseAt - now));
    }
  }

  close(): void {
    clearTimeout(this.timer);
    this.queue.length = 0;
  }
}

/** The proxy. Start it with {@link SlowProxy.start}; servers connect to its `port`. */
export class SlowProxy {
  /** Delay added to every chunk, in ms (0: pass through). */
  delayMs = 0;
  /** While true, nothing is forwarded (connections stay open, as in a network stall). */
  paused = false;
  /** Chunks that went through with a delay: proof the servers' traffic crossed the proxy. */
  delayedChunks = 0;
  /** Connections accepted so far. */
  connections = 0;
  private readonly pipes = new Set<Pipe>();
  private readonly sockets = new Set<net.Socket>();

  private constructor(
    private readonly server: net.Server,
    readonly port: number,
  ) {}

  /** Listens on a free 127.0.0.1 port and forwards to 127.0.0.1:`targetPort`. */
  static async start(targetPort: number): Promise<SlowProxy> {
    const server = net.createServer();
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen({ host: "127.0.0.1", port: 0 }, () => resolve());
    });
    const address = server.address();
    if (typeof address !== "object" || address === null) throw new Error("proxy has no port");
    const proxy = new SlowProxy(server, address.port);
    server.on("connection", (client) => proxy.accept(client, targetPort));
    return proxy;
  }

  /** Sets the delay of every chunk from now on. */
  setDelay(ms: number): void {
    this.delayMs = ms;
  }

  /** Holds all traffic until {@link resume}. */
  pause(): void {
    this.paused = true;
  }

  /** Lets held traffic through again. */
  resume(): void {
    this.paused = false;
    for (const pipe of this.pipes) pipe.pump();
  }

  /** Stops listening and cuts every connection. */
  async close(): Promise<void> {
    for (const socket of this.sockets) socket.destroy();
    for (const pipe of this.pipes) pipe.close();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private accept(client: net.Socket, targetPort: number): void {
    this.connections++;
    const upstream = net.connect({ host: "127.0.0.1", port: targetPort });
    this.sockets.add(client);
    this.sockets.add(upstream);
    const up = new Pipe(client, upstream, this);
    const down = new Pipe(upstream, client, this);
    this.pipes.add(up);
    this.pipes.add(down);
    const end = () => {
      client.destroy();
      upstream.destroy();
      up.close();
      down.close();
      this.pipes.delete(up);
      this.pipes.delete(down);
      this.sockets.delete(client);
      this.sockets.delete(upstream);
    };
    client.on("close", end);
    upstream.on("close", end);
    client.on("error", end);
    upstream.on("error", end);
  }
}
