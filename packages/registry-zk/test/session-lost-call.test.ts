// A call still waiting when its session is lost (the server hung past the silence limit) fails with
// UNAVAILABLE, naming the loss, which an acquire's caller retries, not with CLOSED, which means the
// registry was closed by its user. A real ZooKeeper, paused with SIGSTOP.
import { ErrorCodes, isLeafError } from "@leaf/core";
import { startZookeeper, type ZookeeperHandle } from "@leaf/testkit";
import { afterAll, beforeAll, expect, it } from "vitest";
import { ZkSession } from "../src/zk-session";

let zk: ZookeeperHandle;

beforeAll(async () => {
  zk = await startZookeeper({ tickTime: 500, useEnv: false });
});

afterAll(async () => {
  await zk?.dispose();
});

const settings = () => ({
  servers: zk.connectString,
  chroot: "",
  sessionTimeoutMs: 2000,
  connectTimeoutMs: 10_000,
  operationTimeoutMs: 30_000,
  silenceLimitMs: undefined,
  auth: undefined,
  acls: [],
});

it("fails a call pending at the session's loss with UNAVAILABLE naming it, and close() after with CLOSED", async () => {
  const session = await ZkSession.open(settings());
  zk.pause();
  try {
    const pending = session.exists("/").then(
      () => undefined,
      (error: unknown) => error,
    );
    const error = await pending;
    expect(session.lost.aborted).toBe(true);
    expect(isLeafError(error, ErrorCodes.UNAVAILABLE), String(error)).toBe(true);
    expect((error as Error).message).toMatch(/ZooKeeper session 0x[0-9a-f]+ lost: .*not answered/);
  } finally {
    zk.resume();
    await session.close();
  }
  const closed = new Set<string>();
  const other = await ZkSession.open(settings());
  zk.pause();
  try {
    const pending = other.exists("/").catch((error: unknown) => {
      if (isLeafError(error)) closed.add(error.code);
    });
    void other.close();
    await pending;
    expect([...closed]).toEqual([ErrorCodes.CLOSED]);
  } finally {
    zk.resume();
  }
});
