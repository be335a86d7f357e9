// A server's high-water marks as its admin API lists them (`adminOn()`): the end of the highest
// range it took per tag, kept in its data folder. The operator's bound after a store lost writes.
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
