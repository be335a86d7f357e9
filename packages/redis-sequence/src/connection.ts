// The Redis side of a sequence: the shared RedisLink (@leaf/redis-support, a client made from a URL
// or passed in, scripts by SHA, time limits, the eviction-policy check) and the sequence's reading
// of a failed round trip.
import type { LeafError } from "@leaf/core";
import { redisCallError } from "@leaf/redis-support";

export { TimeLimitError as RedisTimeoutError } from "@leaf/redis-support";

const COMPONENT = "redis-sequence";

/** The UNAVAILABLE (or CORRUPT_DATA) error of a failed round trip: where Redis is, what failed. */
export function unavailable(
  description: string,
  cause: unknown,
  what: string,
  details: Record<string, unknown> = {},
): LeafError {
  return redisCallError(cause, {
    component: COMPONENT,
    where: description,
    what,
    corrupt: /WRONGTYPE|not an integer/,
    keysOf: "the namespace",
    ownKeys: "give this sequence its own namespace or keyPrefix",
    meanwhile: "Cached ranges are used until they run out",
    details,
  });
}
