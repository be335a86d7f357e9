// Four separate processes take 250,000 ids each from one namespace, across all shards: no id and
// no (second, sequence) pair repeats, and every id parses back to the shard it was asked for.
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type RedisHandle, runNode, startRedis } from "@leaf/testkit";
import { afterAll, beforeAll, expect, it } from "vitest";
import { SequenceIdFormat } from "../src/index";
import { freshNamespace } from "./helpers";

const PROCESSES = 4;
const PER_PROCESS = 250_000;
let redis: RedisHandle;
let dir: string;

beforeAll(async () => {
  redis = await startRedis();
  dir = mkdtempSync(join(tmpdir(), "leaf-redis-sequence-"));
});

afterAll(async () => {
  await redis?.dispose();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

function sortedHasRepeat(values: BigUint64Array | Float64Array): number {
  values.sort();
  for (let i = 1; i < values.length; i++) if (values[i] === values[i - 1]) return i;
  return -1;
}

it("gives four processes taking 250,000 ids each across shards no duplicate", async () => {
  const namespace = freshNamespace("procs");
  const fixture = join(import.meta.dirname, "fixtures", "take-ids.ts");
  const runs = await Promise.all(
    Array.from({ length: PROCESSES }, (_, p) =>
      runNode(
        fixture,
        [redis.url, namespace, String(PER_PROCESS), String(p * 1024), join(dir, `ids-${p}.bin`)],
        { timeoutMs: 90_000 },
      ),
    ),
  );
  for (const run of runs) {
    expect(run.stderr).toBe("");
    expect(run.code).toBe(0);
  }
  const format = new SequenceIdFormat();
  const all = new BigUint64Array(PROCESSES * PER_PROCESS);
  const secondAndSequence = new Float64Array(PROCESSES * PER_PROCESS);
  const perSecond = new Map<number, number>();
  for (let p = 0; p < PROCESSES; p++) {
    const buffer = readFileSync(join(dir, `ids-${p}.bin`));
    const ids = new BigUint64Array(buffer.buffer, buffer.byteOffset, buffer.byteLength / 8);
    expect(ids.length).toBe(PER_PROCESS);
    for (let i = 0; i < ids.length; i++) {
      const id = ids[i]!;
      const parsed = format.parse(id);
      if (parsed.shard !== (p * 1024 + i) % 4096) {
        throw new Error(`process ${p} id ${i} (${id}) has shard ${parsed.shard}`);
      }
      const again = format.parse(format.format(id, "P"));
      if (again.id !== id || again.sequence !== parsed.sequence || again.second !== parsed.second) {
        throw new Error(`id ${id} does not survive its string form`);
      }
      all[p * PER_PROCESS + i] = id;
      secondAndSequence[p * PER_PROCESS + i] = parsed.second * 2 ** 19 + parsed.sequence;
      perSecond.set(parsed.second, (perSecond.get(parsed.second) ?? 0) + 1);
    }
  }
  expect(sortedHasRepeat(all)).toBe(-1);
  // One counter per second for the whole namespace: sequences never repeat in a second.
  expect(sortedHasRepeat(secondAndSequence)).toBe(-1);
  for (const count of perSecond.values()) expect(count).toBeLessThanOrEqual(524_288);
  const stats = runs.map((run) => JSON.parse(run.stdout) as { ids: number; ranges: number });
  expect(stats.reduce((sum, s) => sum + s.ids, 0)).toBe(PROCESSES * PER_PROCESS);
});
