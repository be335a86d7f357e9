// A server's high-water marks as its admin API lists them (`adminOn()`): the end of the highest
// range it took per tag, kept in its data folder. The operator's bound after a store lost writes.
import { pollFor } from "@leaf/testkit";
import type { LeafProcess } from "./leaf-process";
import { ADMIN_TOKEN } from "./server-configs";

/**
 * The highest high-water mark `server` keeps for `tag` (its admin API, `adminOn()`): the end of the
 * highest range it took. Undefined when it does not answer.
 */
export async function highWaterOf(server: LeafProcess, tag: string): Promise<bigint | undefined> {
  const page = await server
    .getJson<{ marks: Array<{ tag: string; highWater: string }> }>(
      "/api/v1/admin/high-water",
      2000,
      { authorization: `Bearer ${ADMIN_TOKEN}` },
    )
    .catch(() => undefined);
  if (!page) return undefined;
  return page.marks
    .filter((m) => m.tag === tag)
    .reduce((highest, m) => (BigInt(m.highWater) > highest ? BigInt(m.highWater) : highest), 0n);
}

/**
 * Each of `labels`' marks of `tag`, asked again every `intervalMs` (for at most `timeoutMs`) of the
 * servers whose last answer `settled` does not accept yet (no answer, a mark not past a bound).
 * The last answer of each; undefined where none came.
 */
export async function marksUntil(
  labels: string[],
  serverOf: (label: string) => LeafProcess,
  tag: string,
  settled: (label: string, mark: bigint | undefined) => boolean,
  timeoutMs: number,
  intervalMs: number,
): Promise<Map<string, bigint | undefined>> {
  const marks = new Map<string, bigint | undefined>();
  let left = labels;
  await pollFor(
    async () => {
      const answers = await Promise.all(left.map((label) => highWaterOf(serverOf(label), tag)));
      for (const [i, label] of left.entries()) marks.set(label, answers[i]);
      left = left.filter((label) => !settled(label, marks.get(label)));
      return left.length === 0 ? true : undefined;
    },
    timeoutMs,
    intervalMs,
  );
  return marks;
}
