// One range request of a segment: asks the servers for up to `count` ids of a tag and checks the
// answer (decimal strings, start below end, no more ids than asked, the tag asked for, nothing past
// 2^63 - 1) before any id of it is handed out. Apart from segment-ids.ts, which caches the ranges.
import { ClientErrorCodes, LeafClientError } from "./errors";
import type { ServerPool } from "./server-pool";

/** The most ids one range request asks for (the server's limit). */
export const MAX_ASK = 2_147_483_647;
const DIGITS = /^[0-9]{1,20}$/;

/** A range `[start, end)` a server handed over. */
export interface Range {
  start: bigint;
  end: bigint;
}

/** What a range request needs of the segment's settings. */
export interface RangeRequest {
  tag: string;
  token: string | undefined;
}

/**
 * Asks the pool for a range of `count` ids (1 .. {@link MAX_ASK}) by `deadline` (a
 * `performance.now()` time: the whole refill's, when it takes several requests); `stop` aborts it.
 */
export function fetchRange(
  pool: ServerPool,
  request: RangeRequest,
  count: number,
  deadline: number,
  stop: AbortSignal,
): Promise<Range> {
  const tag = request.tag;
  return pool.request({
    path: `/api/v1/segment/${encodeURIComponent(tag)}/range?count=${count}`,
    token: request.token,
    deadline,
    signal: stop,
    parse: (body, server) => parseRange(body, tag, count, server),
  });
}

/** A range answer checked: digits, start < end, no more ids than asked, the tag asked for. */
function parseRange(body: unknown, tag: string, asked: number, server: string): Range {
  const b = body as { tag?: unknown; start?: unknown; end?: unknown };
  const bad = (why: string) =>
    new LeafClientError({
      code: ClientErrorCodes.BAD_RESPONSE,
      message: `${server} answered a range request for tag ${JSON.stringify(tag)} with ${why}: ${JSON.stringify(body).slice(0, 160)}`,
      server,
      status: 200,
    });
  if (b === null || typeof b !== "object") throw bad("no object");
  if (b.tag !== tag) throw bad("another tag");
  if (
    typeof b.start !== "string" ||
    !DIGITS.test(b.start) ||
    typeof b.end !== "string" ||
    !DIGITS.test(b.end)
  ) {
    throw bad("start or end not a decimal string");
  }
  const start = BigInt(b.start);
  const end = BigInt(b.end);
  if (end <= start) throw bad("an empty range");
  if (end - start > BigInt(asked)) throw bad(`more ids than the ${asked} asked for`);
  if (end > 2n ** 63n) throw bad("ids past 2^63 - 1");
  return { start, end };
}
