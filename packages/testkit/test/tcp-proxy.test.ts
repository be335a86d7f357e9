// The TCP proxy's cut is a partition: nothing crosses it either way, not even a close. A server
// behind it keeps a vanished client's connection (and what hangs on it, such as a MySQL named lock)
// until the cut heals; without a cut a close goes through at once.
import net from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TcpProxy } from "../src/index";

let server: net.Server;
let port = 0;
const serverSides: net.Socket[] = [];

beforeAll(async () => {
  server = net.createServer((socket) => {
    serverSides.push(socket);
    socket.on("data", (chunk) => socket.write(chunk));
    socket.on("error", () => {});
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  port = (server.address() as net.AddressInfo).port;
});
afterAll(async () => {
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

/** Connects through `proxy`, checks one echo, and returns the client and the server's side. */
async function connected(proxy: TcpProxy): Promise<{ client: net.Socket; far: net.Socket }> {
  const before = serverSides.length;
  const client = net.connect(proxy.port, "127.0.0.1");
  client.on("error", () => {});
  await new Promise<void>((resolve) => client.once("connect", () => resolve()));
  client.write("ping");
  await new Promise<void>((resolve) => client.once("data", () => resolve()));
  expect(serverSides.length).toBe(before + 1);
  return { client, far: serverSides[serverSides.length - 1]! };
}

const closed = (socket: net.Socket, withinMs: number) =>
  new Promise<boolean>((resolve) => {
    if (socket.destroyed) return resolve(true);
    const timer = setTimeout(() => resolve(false), withinMs);
    socket.once("close", () => {
      clearTimeout(timer);
      resolve(true);
    });
  });

describe("TcpProxy", () => {
  it("passes a client's close to the server at once when not cut", async () => {
    const proxy = await TcpProxy.start({ targetPort: port });
    try {
      const { client, far } = await connected(proxy);
      client.destroy();
      expect(await closed(far, 2000)).toBe(true);
    } finally {
      await proxy.close();
    }
  });

  it("keeps the server's side open when the client closes during a cut, and resets it on heal", async () => {
    const proxy = await TcpProxy.start({ targetPort: port });
    try {
      const { client, far } = await connected(proxy);
      proxy.cutOff();
      client.destroy();
      // A partition: the server hears nothing of the close.
      expect(await closed(far, 500)).toBe(false);
      proxy.heal();
      expect(await closed(far, 2000)).toBe(true);
    } finally {
      await proxy.close();
    }
  });

  it("shows a listener each chunk a client sends, with its connection's number, but not what a cut drops", async () => {
    const proxy = await TcpProxy.start({ targetPort: port });
    const seen: string[] = [];
    try {
      proxy.onClientData((chunk, connection) => seen.push(`${connection}:${chunk}`));
      const one = await connected(proxy);
      const two = await connected(proxy);
      two.client.write("second");
      await new Promise<void>((resolve) => two.client.once("data", () => resolve()));
      expect(seen).toEqual(["1:ping", "2:ping", "2:second"]);
      proxy.cutOff();
      one.client.write("lost");
      await new Promise((resolve) => setTimeout(resolve, 100));
      expect(seen).toHaveLength(3);
      proxy.heal();
      proxy.onClientData(undefined);
      await connected(proxy);
      expect(seen).toHaveLength(3);
    } finally {
      await proxy.close();
    }
  });

  it("retarget() resets open connections and forwards new ones to the new port", async () => {
    const other = net.createServer((socket) => {
      socket.on("data", () => socket.write("other"));
      socket.on("error", () => {});
    });
    await new Promise<void>((resolve) => other.listen(0, "127.0.0.1", resolve));
    const proxy = await TcpProxy.start({ targetPort: port });
    try {
      const { client } = await connected(proxy);
      proxy.retarget((other.address() as net.AddressInfo).port);
      expect(await closed(client, 2000)).toBe(true);
      expect(proxy.targetPort).toBe((other.address() as net.AddressInfo).port);
      const next = net.connect(proxy.port, "127.0.0.1");
      next.on("error", () => {});
      await new Promise<void>((resolve) => next.once("connect", () => resolve()));
      next.write("ping");
      const answer = await new Promise<string>((resolve) =>
        next.once("data", (chunk) => resolve(String(chunk))),
      );
      expect(answer).toBe("other");
      next.destroy();
      expect(() => proxy.retarget(0)).toThrow(/targetPort 0 is not a port/);
    } finally {
      await proxy.close();
      await new Promise<void>((resolve) => other.close(() => resolve()));
    }
  });
});
