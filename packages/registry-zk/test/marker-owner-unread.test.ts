// A marker found held (NODE_EXISTS) whose owner cannot be read because ZooKeeper stops answering
// right then: a start is refused as another process's (WORKER_ID_IN_USE), never UNAVAILABLE, which
// would start it from its cache file while that process may issue under the id; a running lease
// taking its marker again gets UNAVAILABLE and keeps its id. A real ZooKeeper
// cannot fail one request between two answers on demand, so the session here is a stand-in that
// gives exactly those two answers.
import { ErrorCodes, isLeafError, LeafError } from "@leaf/core";
import { expect, it } from "vitest";
import { claimMarker } from "../src/normal-nodes";
import { resolveOptions } from "../src/options";
import { leafTree } from "../src/paths";
import { ZkCodes } from "../src/zk-client";
import type { ZkSession } from "../src/zk-session";

const node = { name: "unread", ip: "10.7.0.1", port: 8080 };
const options = resolveOptions({ url: "127.0.0.1:2181", mode: "normal", cacheFile: false });

function standIn(getData: () => Promise<unknown>): ZkSession {
  return {
    sessionId: "00000000000000aa",
    sessionTimeoutMs: 2000,
    create: async () => {
      throw new LeafError({
        component: "registry-zk",
        code: ErrorCodes.UNAVAILABLE,
        message: "node exists",
        details: { zkCode: ZkCodes.NODE_EXISTS },
      });
    },
    getData,
  } as unknown as ZkSession;
}

const unavailable = () =>
  Promise.reject(
    new LeafError({
      component: "registry-zk",
      code: ErrorCodes.UNAVAILABLE,
      message: "ZooKeeper session 0xaa lost: the leader answered nothing",
    }),
  );

it("refuses with WORKER_ID_IN_USE when the held marker's owner cannot be read", async () => {
  const error = await claimMarker(standIn(unavailable), leafTree(node.name), node, options, {
    previousSessions: [],
    wait: true,
    signal: undefined,
  }).catch((e: unknown) => e);
  expect(isLeafError(error, ErrorCodes.WORKER_ID_IN_USE), String(error)).toBe(true);
  expect((error as Error).message).toContain("not started from the cache file");
});

it("still fails with UNAVAILABLE when the marker was this process's own (an earlier session's)", async () => {
  let reads = 0;
  const own = standIn(async () => {
    reads++;
    if (reads > 1) return unavailable();
    return { data: Buffer.from("{}"), stat: { ephemeralOwner: "00000000000000bb", version: 0 } };
  });
  Object.assign(own, {
    remove: async () => {
      throw new LeafError({
        component: "registry-zk",
        code: ErrorCodes.UNAVAILABLE,
        message: "ZooKeeper session 0xaa lost: the leader answered nothing",
      });
    },
  });
  const error = await claimMarker(own, leafTree(node.name), node, options, {
    previousSessions: ["00000000000000bb"],
    wait: true,
    signal: undefined,
  }).catch((e: unknown) => e);
  expect(isLeafError(error, ErrorCodes.UNAVAILABLE), String(error)).toBe(true);
});

it("leaves a lease taking its marker again (no wait) with UNAVAILABLE, which it rides out, when the owner cannot be read", async () => {
  // A lease whose session was judged lost before the server expired it meets its own old marker;
  // a failed read there must not lose the lease as if another process held the id.
  const error = await claimMarker(standIn(unavailable), leafTree(node.name), node, options, {
    previousSessions: ["00000000000000bb"],
    wait: false,
    signal: undefined,
  }).catch((e: unknown) => e);
  expect(isLeafError(error, ErrorCodes.UNAVAILABLE), String(error)).toBe(true);
});
