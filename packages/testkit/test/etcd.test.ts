// startEtcd(): a private one-member etcd that keeps its data across kill() and restart(), and
// answers nothing while paused. Talks to etcd's JSON gateway (/v3/kv/...) so the kit needs no
// client.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type EtcdHandle, startEtcd } from "../src/index";
import { exchange } from "../src/probes";

const b64 = (text: string) => Buffer.from(text).toString("base64");

/** POSTs `body` to etcd's JSON gateway and returns the parsed answer. */
async function gateway(etcd: EtcdHandle, path: string, body: object, timeoutMs = 2000) {
  const json = JSON.stringify(body);
  const reply = await exchange(
    etcd.host,
    etcd.port,
    `POST ${path} HTTP/1.0\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(json)}\r\n\r\n${json}`,
    timeoutMs,
  );
  return JSON.parse(reply.slice(reply.indexOf("\r\n\r\n") + 4)) as {
    kvs?: { value: string }[];
  };
}

async function put(etcd: EtcdHandle, key: string, value: string): Promise<void> {
  await gateway(etcd, "/v3/kv/put", { key: b64(key), value: b64(value) });
}

async function get(etcd: EtcdHandle, key: string, timeoutMs?: number): Promise<string | undefined> {
  const answer = await gateway(etcd, "/v3/kv/range", { key: b64(key) }, timeoutMs);
  const value = answer.kvs?.[0]?.value;
  return value === undefined ? undefined : Buffer.from(value, "base64").toString();
}

describe("startEtcd", () => {
  let etcd: EtcdHandle;

  beforeAll(async () => {
    etcd = await startEtcd({ useEnv: false });
  });

  afterAll(async () => {
    await etcd.dispose();
  });

  it("runs a private member that stores and reads keys", async () => {
    expect(etcd.external).toBe(false);
    expect(etcd.url).toBe(`http://127.0.0.1:${etcd.port}`);
    await put(etcd, "greeting", "hello");
    expect(await get(etcd, "greeting")).toBe("hello");
  });

  it("keeps its data on the same port after kill() and start()", async () => {
    await put(etcd, "survivor", "yes");
    const { port, pid } = etcd;
    await etcd.kill();
    expect(etcd.running).toBe(false);
    expect(etcd.pid).toBeUndefined();
    await etcd.start();
    expect(etcd.port).toBe(port);
    expect(etcd.pid).not.toBe(pid);
    expect(await get(etcd, "survivor")).toBe("yes");
  });

  it("answers nothing while paused and answers again after resume()", async () => {
    etcd.pause();
    try {
      const answer = await get(etcd, "greeting", 300).then(
        (value) => `answered ${String(value)}`,
        (error: Error) => error.message,
      );
      expect(answer).toMatch(/no answer/);
    } finally {
      etcd.resume();
    }
    expect(await get(etcd, "greeting")).toBe("hello");
  });

  it("restarts gracefully on the same port, also from paused", async () => {
    const { port } = etcd;
    etcd.pause();
    await etcd.restart();
    expect(etcd.port).toBe(port);
    expect(await get(etcd, "survivor")).toBe("yes");
  });

  it("runs two members side by side, each on its own ports", async () => {
    const other = await startEtcd({ useEnv: false });
    try {
      expect(other.port).not.toBe(etcd.port);
      await put(other, "greeting", "other");
      expect(await get(other, "greeting")).toBe("other");
      expect(await get(etcd, "greeting")).toBe("hello");
    } finally {
      await other.dispose();
    }
  });
});
