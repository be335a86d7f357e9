// The registry's side of Redis: the shared RedisLink (@leaf/redis-support) and its failures in the
// registry's words (redisCallError: UNAVAILABLE, or CORRUPT_DATA when a key holds data of another
// kind).
import type { LeafError } from "@leaf/core";
import { type LuaScript, type RedisLink, redisCallError } from "@leaf/redis-support";

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

/** The registry's error for a failed call on `link`: UNAVAILABLE, or CORRUPT_DATA (other keys). */
export function redisFailure(link: RedisLink, cause: unknown, what: string): LeafError {
  return redisCallError(cause, {
    component: COMPONENT,
    where: link.description,
    what,
    corrupt: /WRONGTYPE|Expected value|cjson|attempt to/,
    keysOf: "the registry",
    ownKeys: "give the registry its own keyPrefix",
    lastClientError: link.lastClientError,
  });
}
