// What a failed Redis round trip means, in one place for every Redis adapter: CORRUPT_DATA when a
// key holds data of another kind (another program writes to the adapter's keys), else UNAVAILABLE
// naming where Redis is and whether it refused the write or did not answer.
import { ErrorCodes, LeafError } from "@leaf/core";
import { redisFailurePhrase } from "./redis-link";

/** What {@link redisCallError} says, in the adapter's words. */
export interface RedisCallErrorContext {
  /** The adapter's name in the message ("registry-redis"). */
  component: string;
  /** Where Redis is, without any password (RedisLink's `description`). */
  where: string;
  /** What was being done ("renewing worker id 7"). */
  what: string;
  /** Replies that mean a key holds data of another kind (WRONGTYPE, a script's type error). */
  corrupt: RegExp;
  /** Whose keys these are ("the registry"): "a key of the registry in ...". */
  keysOf: string;
  /** How to give the adapter keys of its own ("give the registry its own keyPrefix"). */
  ownKeys: string;
  /** The client's last connection error, named when it says more than the failure. */
  lastClientError?: string | undefined;
  /** A sentence appended to an UNAVAILABLE message (what the adapter does meanwhile). */
  meanwhile?: string;
  /** Further details of the error. */
  details?: Record<string, unknown>;
}

/** The error of a failed round trip: CORRUPT_DATA for a key of another kind, else UNAVAILABLE. */
export function redisCallError(cause: unknown, context: RedisCallErrorContext): LeafError {
  const reason = cause instanceof Error ? cause.message : String(cause);
  const details = { redis: context.where, reason, ...context.details };
  if (context.corrupt.test(reason)) {
    return new LeafError({
      component: context.component,
      code: ErrorCodes.CORRUPT_DATA,
      message:
        `${context.what}: a key of ${context.keysOf} in ${context.where} holds data of another ` +
        `kind (${reason}); another program writes to these keys: ${context.ownKeys}`,
      details,
      cause,
    });
  }
  // A refusal (Redis answered; nothing was changed) and no answer are both UNAVAILABLE: the caller
  // retries either way. The message says which.
  const phrase = redisFailurePhrase(reason, context.lastClientError);
  const meanwhile = context.meanwhile ? `. ${context.meanwhile}` : "";
  return new LeafError({
    component: context.component,
    code: ErrorCodes.UNAVAILABLE,
    message: `${context.what}: Redis at ${context.where} ${phrase}${meanwhile}`,
    details,
    cause,
  });
}
