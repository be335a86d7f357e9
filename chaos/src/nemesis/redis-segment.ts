// What the Redis segment store's family and faults share: its namespace made before the servers
// start, the servers' configuration, and the operator's steps after Redis lost writes, as the
// server README tells them: `leaf store create-namespace` after a restart without persistence (then
// the tags created again above every id handed out), `leaf store lift-fence RAISE_BY` after a
// failover to a replica that missed writes. The operator's bound is the highest high-water mark
// the servers list (every range any of them took ends at or below it).
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { RedisSegmentStore } from "@leaf/segment-redis";
import { runNode } from "@leaf/testkit";
import { highWaterOf } from "../high-water";
import { serverCli } from "../leaf-process";
import { ADMIN_TOKEN, serverConfig, snowflakeOff } from "../server-configs";
import { type Cluster, sleep } from "./cluster";

/** Creates the namespace's marker and `tags` (each from id 1), as an operator does once. */
export async function createRedisNamespace(
  url: string,
  namespace: string,
  tags: Array<{ tag: string; step: number }>,
): Promise<void> {
  const store = new RedisSegmentStore({ url, namespace });
  try {
    await store.createNamespace();
    for (const { tag, step } of tags) {
      await store.createTag({ tag, step, description: "nemesis" });
    }
  } finally {
    await store.close();
  }
}

/**
 * Segment mode on the Redis store at `url` in `namespace`: fixed step, the tag list re-read every
 * 2 s (a tag created again after a loss is found soon).
 */
export function segmentOnRedis(url: string, namespace: string) {
  return {
    segment: {
      enabled: true,
      store: "redis",
      redis: { url, namespace },
      dynamicStep: false,
      refreshIntervalMs: 2000,
    },
  };
}

/**
 * Runs `leaf store ARGS` with the family's configuration, Redis reached straight (the operator is
 * not behind a server's proxy); its output, or an error with it.
 */
export async function operatorCommand(
  c: Cluster,
  namespace: string,
  args: string[],
): Promise<string> {
  const file = join(c.dir, "operator.json");
  writeFileSync(
    file,
    JSON.stringify(
      serverConfig(namespace, segmentOnRedis(c.store("redis").url, namespace), snowflakeOff()),
    ),
  );
  const run = await runNode(serverCli(), ["store", ...args, "--config", file], {
    cwd: c.dir,
    timeoutMs: 30_000,
  });
  const output = `${run.stdout}${run.stderr}`.trim();
  if (run.code !== 0) {
    throw new Error(
      `[leaf] [nemesis] leaf store ${args.join(" ")} failed (${run.code}): ${output}`,
    );
  }
  return output;
}

/** The highest high-water mark of `tag` any of `labels` lists (its admin API); 0 when none does. */
export async function highestMark(c: Cluster, labels: string[], tag: string): Promise<bigint> {
  let highest = 0n;
  for (const label of labels) {
    const mark = await highWaterOf(c.server(label), tag);
    if (mark !== undefined && mark > highest) highest = mark;
  }
  return highest;
}

/**
 * Waits (at most `timeoutMs`) until each of `labels` answered ids after `fromMs` (history ms): a
 * server that saw the loss keeps refusing until it reads the namespace again, so a fault holds its
 * links and processes until then. Returns the servers that did not.
 */
export async function untilAllServe(
  c: Cluster,
  labels: string[],
  fromMs: number,
  timeoutMs: number,
): Promise<string[]> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const served = new Set<string>();
    for (const a of c.history.answers) {
      if (a.code === undefined && a.ids > 0 && a.fromMs >= fromMs) served.add(a.server);
    }
    const waiting = labels.filter((label) => !served.has(label));
    if (waiting.length === 0 || performance.now() > deadline) return waiting;
    await sleep(250);
  }
}

/** Creates `tag` through `label`'s admin API at `startId`; the answer's status and body. */
export async function createTagAt(
  c: Cluster,
  label: string,
  tag: string,
  step: number,
  startId: bigint,
): Promise<string> {
  const answer = await fetch(`${c.server(label).url}/api/v1/admin/tags`, {
    method: "POST",
    headers: { authorization: `Bearer ${ADMIN_TOKEN}`, "content-type": "application/json" },
    body: JSON.stringify({ tag, step, startId: startId.toString() }),
    signal: AbortSignal.timeout(5000),
  });
  return `${answer.status} ${(await answer.text()).slice(0, 200)}`;
}
