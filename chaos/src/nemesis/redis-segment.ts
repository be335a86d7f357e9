// What the Redis segment store's family and faults share: its namespace made before the servers
// start, the servers' configuration, and the operator's steps after Redis lost writes, as the
// server README tells them: `leaf store create-namespace` after a restart without persistence (then
// the tags created again above every id handed out), `leaf store lift-fence RAISE_BY` after a
// failover to a replica that missed writes. The operator's bound is the highest high-water mark
// the servers list (every range any of them took ends at or below it).
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { RedisSegmentStore } from "@leaf/segment-redis";
import { type RedisReplicaSet, runNode, waitUntil } from "@leaf/testkit";
import { highWaterOf } from "../high-water";
import { serverCli } from "../leaf-process";
import { ADMIN_TOKEN, serverConfig, snowflakeOff } from "../server-configs";
import { type Cluster, sleep } from "./cluster";
import type { Family } from "./families";

/**
 * Creates the namespace's marker (every write waiting for `waitReplicas` replicas) and `tags` (each
 * from id 1), as an operator does once.
 */
export async function createRedisNamespace(
  url: string,
  namespace: string,
  tags: Array<{ tag: string; step: number }>,
  waitReplicas = 0,
): Promise<void> {
  const store = new RedisSegmentStore({ url, namespace, waitReplicas });
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
 * Segment mode on the Redis store at `url` in `namespace`, every write waiting for `waitReplicas`
 * replicas: fixed step, the tag list re-read every 2 s (a tag created again after a loss is found
 * soon).
 */
export function segmentOnRedis(url: string, namespace: string, waitReplicas = 0) {
  return {
    segment: {
      enabled: true,
      store: "redis",
      redis: { url, namespace, waitReplicas },
      dynamicStep: false,
      refreshIntervalMs: 2000,
    },
  };
}

/**
 * Runs `leaf store ARGS` with the family's configuration, Redis reached straight (the operator is
 * not behind a server's proxy); its output, or an error with it.
 */
export async function operatorCommand(c: Cluster, family: Family, args: string[]): Promise<string> {
  const namespace = family.redisSegment!;
  const file = join(c.dir, "operator.json");
  const store = segmentOnRedis(c.store("redis").url, namespace, family.redisWaitReplicas);
  writeFileSync(file, JSON.stringify(serverConfig(namespace, store, snowflakeOff())));
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

/**
 * Waits (at most `timeoutMs`) until each of `labels` took a range of `tag` past `mark` (its
 * high-water mark above it), and notes which did: ranges a store that lost what followed `mark`
 * lacks (`lacks`: "the replica misses", say).
 */
export async function untilMarksPast(
  c: Cluster,
  labels: string[],
  tag: string,
  mark: bigint,
  timeoutMs: number,
  lacks: string,
): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  let behind = labels;
  while (behind.length > 0 && performance.now() < deadline) {
    const marks = await Promise.all(behind.map((label) => highestMark(c, [label], tag)));
    behind = behind.filter((_, i) => marks[i]! <= mark);
    if (behind.length > 0) await sleep(250);
  }
  c.note(
    behind.length === 0
      ? `${labels.join(", ")} all took ranges past ${mark} that ${lacks}`
      : `${behind.join(", ")} took no range past ${mark} within ${timeoutMs / 1000} s`,
  );
}

/**
 * Holds a fault until each of `labels` served after the operator's `step` at `fromMs` (history ms;
 * at most 15 s), and notes how long that took.
 */
export async function holdUntilAllServe(
  c: Cluster,
  labels: string[],
  fromMs: number,
  step: string,
): Promise<void> {
  const waiting = await untilAllServe(c, labels, fromMs, 15_000);
  c.note(
    waiting.length === 0
      ? `every server serves again ${((c.history.now() - fromMs) / 1000).toFixed(1)} s after ${step}`
      : `${waiting.join(", ")} served nothing within 15 s of ${step}`,
  );
}

/**
 * `leaf store lift-fence RAISE_BY`, RAISE_BY the highest mark of `tag` that `labels` list; its
 * answer (noted).
 */
export async function liftFenceByHighestMark(
  c: Cluster,
  family: Family,
  labels: string[],
  tag: string,
): Promise<string> {
  const raiseBy = await highestMark(c, labels, tag);
  const answer = await operatorCommand(c, family, ["lift-fence", raiseBy.toString()]);
  c.note(`operator: ${answer}`);
  return answer;
}

/**
 * The operator's step after Redis came back without some of its writes, once the servers had 2 s
 * to refuse: `leaf store create-namespace`; when the namespace still exists (Redis loaded an older
 * snapshot: the tags are there, behind, and the namespace fenced), `leaf store lift-fence` by the
 * highest mark; otherwise each tag created again (the admin API) at that mark. Holds until every
 * server of `labels` served again.
 */
export async function operatorRecovers(
  c: Cluster,
  family: Family,
  labels: string[],
): Promise<void> {
  await sleep(2000);
  const created = await operatorCommand(c, family, ["create-namespace"]);
  c.note(`operator: ${created}`);
  for (const { tag, step } of family.tags) {
    if (/exists already/.test(created)) {
      await liftFenceByHighestMark(c, family, labels, tag);
    } else {
      const highest = await highestMark(c, labels, tag);
      const made = await createTagAt(c, labels[0]!, tag, step, highest);
      c.note(`operator: tag ${tag} created again at ${highest}, the highest mark: ${made}`);
    }
  }
  await holdUntilAllServe(c, labels, c.history.now(), "the operator's step");
}

/**
 * The family's Redis master and its replica while the master is the store (no replica promoted
 * yet) and runs, and each of `labels` runs; undefined otherwise (a fault on it is skipped).
 */
export function runningMaster(c: Cluster, labels: string[]): RedisReplicaSet | undefined {
  const set = c.redisSet;
  if (!set || c.store("redis") !== set.master || !set.master.running) return undefined;
  return labels.every((label) => c.server(label).running) ? set : undefined;
}

/** Waits (at most `timeoutMs`) for `what`; false, noted, when it did not happen. */
export async function waitNoted(
  c: Cluster,
  what: string,
  check: () => Promise<boolean>,
  timeoutMs: number,
): Promise<boolean> {
  try {
    await waitUntil(what, check, timeoutMs);
    return true;
  } catch {
    c.note(`waited ${timeoutMs / 1000} s in vain for ${what}`);
    return false;
  }
}
