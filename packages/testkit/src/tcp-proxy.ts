// A TCP proxy on 127.0.0.1 in front of one server port, for network faults between real processes:
// every chunk can be held for a delay (order kept), held while paused (a stall: nothing lost), or
// dropped while cut (a partition: the connections stay open, nothing gets through either way, not
// even a close, and new connections are accepted and never answered). After a cut, heal() resets
// every connection that lost bytes, as a real network's peers would after their timeouts, and
// forwards again.
import net from "node:net";
import { performance } from "node:perf_hooks";
import { TestkitError } from "./errors";
import { LOOPBACK } from "./ports";

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
    private readonly proxy: TcpProxy,
    link: Link,
    /** Shown every chunk this pipe forwards (the client's side: see TcpProxy.onClientData). */
    observe?: (chunk: Buffer) => void,
  ) {
    from.on("data", (chunk: Buffer) => {
      if (proxy.isCut) {
        link.lostBytes = true;
        return;
      }
      observe?.(chunk);
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
    if (this.proxy.isPaused) return;
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

  /** Drops what is queued (a cut loses it). */
  drop(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    this.queue.length = 0;
    this.queuedBytes = 0;
    if (this.from.isPaused()) this.from.resume();
  }
}

/**
 * One accepted connection and its upstream connection (none while it was accepted during a cut).
 */
interface Link {
  /** Its number: the count of connections accepted when it was (1 for the first). */
  id: number;
  client: net.Socket;
  upstream: net.Socket | undefined;
  pipes: Pipe[];
  /** Bytes were dropped: the stream is broken, heal() resets it. */
  lostBytes: boolean;
}

function checkPort(port: number, where: string): void {
  if (!Number.isInteger(port) || port < 1 || port > 65_535) {
    throw new TestkitError(
      "TESTKIT_BAD_OPTION",
      `${where}: targetPort ${String(port)} is not a port; expected an integer from 1 to 65535`,
    );
  }
}

/** Sees a chunk a client sent through the proxy, and the number of its connection. */
export type ClientDataListener = (chunk: Buffer, connection: number) => void;

/** Options of {@link TcpProxy.start}. */
export interface TcpProxyOptions {
  /** Port to forward to. */
  targetPort: number;
  /** Host to forward to (default 127.0.0.1). */
  targetHost?: string;
  /** Port to listen on, on 127.0.0.1 (default: a free one). */
  port?: number;
}

/** The proxy. Start it with {@link TcpProxy.start}; clients connect to its `port`. */
export class TcpProxy {
  /** Delay added to every chunk, in ms (0: pass through). */
  delayMs = 0;
  /** Chunks that went through with a delay: proof the traffic crossed the proxy. */
  delayedChunks = 0;
  /** Connections accepted so far. */
  connections = 0;
  private paused = false;
  private cut = false;
  private closed = false;
  private readonly links = new Set<Link>();
  private clientData: ClientDataListener | undefined;

  private constructor(
    private readonly server: net.Server,
    readonly port: number,
    readonly targetHost: string,
    private target: number,
  ) {}

  /** Port forwarded to (see {@link retarget}). */
  get targetPort(): number {
    return this.target;
  }

  /** Listens on 127.0.0.1 (a free port unless `port` is given) and forwards to the target. */
  static async start(options: TcpProxyOptions): Promise<TcpProxy> {
    const targetHost = options.targetHost ?? LOOPBACK;
    checkPort(options.targetPort, "TcpProxy.start");
    const server = net.createServer();
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen({ host: LOOPBACK, port: options.port ?? 0 }, () => {
        server.off("error", reject);
        resolve();
      });
    });
    const address = server.address();
    if (typeof address !== "object" || address === null) {
      server.close();
      throw new TestkitError("TESTKIT_START_FAILED", "TcpProxy.start: the proxy got no port");
    }
    const proxy = new TcpProxy(server, address.port, targetHost, options.targetPort);
    server.on("connection", (client) => proxy.accept(client));
    return proxy;
  }

  /** "127.0.0.1:port" of the proxy. */
  get address(): string {
    return `${LOOPBACK}:${this.port}`;
  }

  /** True while traffic is held (see {@link pause}). */
  get isPaused(): boolean {
    return this.paused;
  }

  /** True while traffic is dropped (see {@link cutOff}). */
  get isCut(): boolean {
    return this.cut;
  }

  /** Connections open now. */
  get openConnections(): number {
    return this.links.size;
  }

  /**
   * Shows `listener` every chunk a client sends from now on that the proxy forwards (not those a
   * cut drops), as it arrives, with the number of its connection: for a fault that acts at a point
   * of the client's own protocol. One listener; undefined removes it.
   */
  onClientData(listener: ClientDataListener | undefined): void {
    this.clientData = listener;
  }

  /** Sets the delay of every chunk from now on. */
  setDelay(ms: number): void {
    this.delayMs = ms;
  }

  /** Holds all traffic (nothing is lost) until {@link resume}. */
  pause(): void {
    this.paused = true;
  }

  /** Lets held traffic through again. */
  resume(): void {
    this.paused = false;
    for (const link of this.links) for (const pipe of link.pipes) pipe.pump();
  }

  /**
   * A partition: from now on every byte, either way, is dropped; connections stay open (neither
   * side hears of it before its own timeouts) and new ones are accepted and never answered.
   */
  cutOff(): void {
    this.cut = true;
    for (const link of this.links) {
      for (const pipe of link.pipes) pipe.drop();
      link.lostBytes = true;
    }
  }

  /** Ends a cut: resets the connections that lost bytes and forwards new ones again. */
  heal(): void {
    this.cut = false;
    for (const link of [...this.links]) if (link.lostBytes) this.end(link);
  }

  /**
   * Forwards to another port from now on, as a virtual IP or a DNS name moves to a new master:
   * every open connection is reset (its client reconnects, to the new target). Ends a cut.
   */
  retarget(targetPort: number): void {
    checkPort(targetPort, "TcpProxy.retarget");
    this.target = targetPort;
    this.cut = false;
    for (const link of [...this.links]) this.end(link);
  }

  /** Stops listening and resets every connection. Idempotent. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const link of [...this.links]) this.end(link);
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private accept(client: net.Socket): void {
    this.connections++;
    const id = this.connections;
    const link: Link = { id, client, upstream: undefined, pipes: [], lostBytes: false };
    this.links.add(link);
    client.on("close", () => this.sideClosed(link));
    client.on("error", () => this.sideClosed(link));
    if (this.cut) {
      // A partition answers nothing: no upstream, every byte dropped.
      link.lostBytes = true;
      client.on("data", () => {});
      return;
    }
    const upstream = net.connect({ host: this.targetHost, port: this.target });
    link.upstream = upstream;
    link.pipes.push(
      new Pipe(client, upstream, this, link, (chunk) => this.clientData?.(chunk, id)),
      new Pipe(upstream, client, this, link),
    );
    upstream.on("close", () => this.sideClosed(link));
    upstream.on("error", () => this.sideClosed(link));
  }

  /**
   * One side closed or failed. A partition carries no FIN or RST either: while cut, the other side
   * keeps its end open (a server keeps a dead client's session, locks and all, until its own
   * timeouts), and heal() resets it. Otherwise the close goes through.
   */
  private sideClosed(link: Link): void {
    if (this.cut && link.lostBytes) return;
    this.end(link);
  }

  private end(link: Link): void {
    if (!this.links.delete(link)) return;
    for (const pipe of link.pipes) pipe.drop();
    link.client.destroy();
    link.upstream?.destroy();
  }
}
