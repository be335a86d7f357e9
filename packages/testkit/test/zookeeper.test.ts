import zookeeper from "node-zookeeper-client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startZookeeper, type ZookeeperHandle } from "../src/index";

type Client = zookeeper.Client;

describe("startZookeeper", () => {
  let zk: ZookeeperHandle;
  const clients: Client[] = [];

  beforeAll(async () => {
    zk = await startZookeeper({ useEnv: false, tickTime: 500, maxSessionTimeout: 4000 });
  });

  afterAll(async () => {
    for (const client of clients) client.close();
    await zk.dispose();
  });

  function connect(sessionTimeout = 2000): Promise<Client> {
    const client = zookeeper.createClient(zk.connectString, { sessionTimeout, spinDelay: 100 });
    clients.push(client);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error("no ZooKeeper session within 10 s")), 10_000);
      client.once("connected", () => {
        clearTimeout(timer);
        resolve(client);
      });
      client.connect();
    });
  }

  function create(client: Client, path: string, data: string): Promise<void> {
    return new Promise((resolve, reject) => {
      client.create(path, Buffer.from(data), (error) => (error ? reject(error) : resolve()));
    });
  }

  function getData(client: Client, path: string): Promise<string> {
    return new Promise((resolve, reject) => {
      client.getData(path, (error, data) => (error ? reject(error) : resolve(String(data))));
    });
  }

  it("runs a private server where a client creates and reads a znode", async () => {
    expect(zk.external).toBe(false);
    expect(zk.url).toBe(`127.0.0.1:${zk.port}`);
    expect(zk.connectString).toBe(zk.url);
    const client = await connect();
    await create(client, "/leaf", "forever");
    expect(await getData(client, "/leaf")).toBe("forever");
  });

  it("keeps znodes across kill() and start() on the same port", async () => {
    const writer = await connect();
    await create(writer, "/survivor", "yes");
    writer.close();
    const { port } = zk;
    await zk.kill();
    expect(zk.running).toBe(false);
    await zk.start();
    expect(zk.port).toBe(port);
    expect(await getData(await connect(), "/survivor")).toBe("yes");
  });

  it("bounds session timeouts by the configured minimum and maximum", async () => {
    // tickTime 500 makes the minimum 1000 ms; the maximum was set to 4000 ms.
    expect((await connect(200)).getSessionTimeout()).toBe(1000);
    expect((await connect(60_000)).getSessionTimeout()).toBe(4000);
  });
});
