// Sixteen node processes acquire at the same moment: every one gets its own worker id, in both
// modes (each process acquires in both at once, under two leaf names). Separate processes,
// separate ZooKeeper sessions: nothing is shared but the server.
import { ChildLines, spawnNode, startZookeeper, type ZookeeperHandle } from "@leaf/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ACQUIRER, uniqueName } from "./helpers";

const PROCESSES = 16;

let zk: ZookeeperHandle;

beforeAll(async () => {
  zk = await startZookeeper({ tickTime: 500 });
});

afterAll(async () => {
  await zk?.dispose();
});

async function acquireInProcesses(): Promise<Array<{ recycle: number; normal: number }>> {
  const name = uniqueName("proc");
  const children = Array.from({ length: PROCESSES }, (_, i) =>
    spawnNode(ACQUIRER, [zk.connectString, name, String(i)]),
  );
  const stderr: string[] = [];
  for (const child of children) child.stderr!.on("data", (chunk) => stderr.push(String(chunk)));
  try {
    const readers = children.map((child) => new ChildLines(child));
    // Every process is up and connected to nothing yet; then all acquire at once.
    for (const reader of readers) expect(await reader.next("ready", 60_000)).toBe("ready");
    for (const child of children) child.stdin!.write("go\n");
    const answers = await Promise.all(
      readers.map(async (r) => JSON.parse(await r.next("the acquired ids", 60_000))),
    );
    for (const answer of answers) expect(answer.error, stderr.join("")).toBeUndefined();
    for (const child of children) child.stdin!.write("release\n");
    await Promise.all(
      children.map((child) =>
        child.exitCode !== null
          ? Promise.resolve()
          : new Promise((resolve) => child.once("exit", resolve)),
      ),
    );
    return answers;
  } finally {
    for (const child of children) if (child.exitCode === null) child.kill("SIGKILL");
  }
}

describe("concurrent acquirers in separate processes", () => {
  it("gives sixteen processes sixteen distinct worker ids in both modes", async () => {
    const answers = await acquireInProcesses();
    const all = Array.from({ length: PROCESSES }, (_, i) => i);
    // Recycle mode hands out the lowest free ids; normal mode ZooKeeper's sequence numbers.
    expect(answers.map((a) => a.recycle).sort((a, b) => a - b)).toEqual(all);
    expect(answers.map((a) => a.normal).sort((a, b) => a - b)).toEqual(all);
  });
});
