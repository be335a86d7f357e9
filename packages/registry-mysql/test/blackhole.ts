// A TCP proxy in front of MariaDB that can be cut: from then on it silently drops every byte both
// ways and leaves new connections hanging, as a network partition does between one node and the
// database while other nodes still reach it.
import net from "node:net";

export class Blackhole {
  private cut = false;
  private readonly sockets = new Set<net.Socket>();
  private readonly server: net.Server;

  private constructor(
    private readonly targetPort: number,
    readonly port: number,
    server: net.Server,
  ) {
    this.server = server;
  }

  /** Starts a proxy on a free loopback port forwarding to 127.0.0.1:targetPort. */
  static async start(targetPort: number): Promise<Blackhole> {
    let proxy: Blackhole | undefined;
    const server = net.createServer((client) => proxy!.accept(client));
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const port = (server.address() as net.AddressInfo).port;
    proxy = new Blackhole(targetPort, port, server);
    return proxy;
  }

  /** From now on nothing gets through, and nothing is closed either. */
  cutOff(): void {
    this.cut = true;
  }

  async close(): Promise<void> {
    for (const socket of this.sockets) socket.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private accept(client: net.Socket): void {
    this.sockets.add(client);
    client.on("error", () => {});
    if (this.cut) return;
    const upstream = net.connect(this.targetPort, "127.0.0.1");
    this.sockets.add(upstream);
    upstream.on("error", () => client.destroy());
    client.on("data", (data) => {
      if (!this.cut) upstream.write(data);
    });
    upstream.on("data", (data) => {
      if (!this.cut) client.write(data);
    });
    client.on("close", () => {
      if (!this.cut) upstream.destroy();
    });
    upstream.on("close", () => {
      if (!this.cut) client.destroy();
    });
  }
}
