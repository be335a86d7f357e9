// The registry's side of Redis: the shared RedisLink (@leaf/redis-support) with this registry's
// reading of a failure: UNAVAILABLE naming where Redis is, or CORRUPT_DATA when a key holds data of
// another kind.
import { ErrorCodes, LeafError } from "@leaf/core";
import { type LuaScript, type RedisLink, redisFailurePhrase } from "@leaf/redis-support";

export const COMPONENT = "registry-redis";

/**
 * Runs `script` on `link` within the link's time limit. Rejects with UNAVAILABLE naming `what`, or
 * CORRUPT_DATA when a key holds data of another kind.
 */
export async function runScript(
  link: RedisLink,
  script: LuaScript,
  keys: readonly string[],
  args: readonly (string | number)[],
  what: string,
): Promise<unknown> {
  try {
    return await link.run(script, keys, args);
  } catch (error) {
    throw redisFailure(link, error, what);
  }
}

/** The registry's error for a failed call on `link`: UNAVAILABLE, or CORRUPT_DATA for foreign keys. */
export function redisFailure(link: RedisLink, cause: unknown, what: string): LeafError {
  const reason = cause instanceof Error ? cause.message : String(cause);
  if (/WRONGTYPE|Expected value|cjson|attempt to/.test(reason)) {
    return new LeafError({
      component: COMPONENT,
      code: ErrorCodes.CORRUPT_DATA,
      message:
        `${what}: a key of the registry in ${link.description} holds data of another kind ` +
        `(${reason}); another program writes to these keys: give the registry its own keyPrefix`,
      details: { redis: link.description, reason },
      cause,
    });
  }
  // A refusal (Redis answered; nothing was changed) and no answer are both UNAVAILABLE: the
  // caller retries either way. The message says which.
  return new LeafError({
    component: COMPONENT,
    code: ErrorCodes.UNAVAILABLE,
    message: `${what}: Redis at ${link.description} ${redisFailurePhrase(reason, link.lastClientError)}`,
    details: { redis: link.description, reason },
    cause,
  });
}
