// The Redis side of a sequence: the shared RedisLink (@leaf/redis-support, a client made from a URL
// or passed in, scripts by SHA, time limits, the eviction-policy check) and the sequence's reading
// of a failed round trip.
import { ErrorCodes, LeafError } from "@leaf/core";
import { redisFailurePhrase } from "@leaf/redis-support";

export { TimeLimitError as RedisTimeoutError } from "@leaf/redis-support";

const COMPONENT = "redis-sequence";

/** An UNAVAILABLE error for a failed round trip, naming where Redis is and what happened. */
export function unavailable(
  description: string,
  cause: unknown,
  what: string,
  details: Record<string, unknown> = {},
): LeafError {
  const reason = cause instanceof Error ? cause.message : String(cause);
  const corrupt = /WRONGTYPE|not an integer/.test(reason);
  return new LeafError({
    component: COMPONENT,
    code: corrupt ? ErrorCodes.CORRUPT_DATA : ErrorCodes.UNAVAILABLE,
    message: corrupt
      ? `${what}: a key of the namespace in ${description} holds data of another kind (${reason}); ` +
        "another program writes to these keys: give this sequence its own namespace or keyPrefix"
      : `${what}: Redis at ${description} ${redisFailurePhrase(reason)}. Cached ranges are used ` +
        "until they run out",
    details: { redis: description, reason, ...details },
    cause,
  });
}
