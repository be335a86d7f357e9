// The redis sequence's settings: Redis's URL, the namespace (the service name unless set) and the
// string form's prefix and time zone, checked as the sequence would check them.
import { describeValue } from "@leaf/core";
import { SequenceIdFormat } from "@leaf/redis-sequence";
import type { RedisSequenceSettings } from "./config-types";
import type { ConfigValues } from "./config-values";

/** True when the redis sequence is served: set so, or by default when its URL is named. */
export function redisSequenceEnabled(v: ConfigValues): boolean {
  return v.optional("redisSequence.enabled") ?? v.named("redisSequence.url");
}

/**
 * The redis sequence's settings (it is enabled); undefined, with a problem noted, without a URL.
 */
export function redisSequenceSettings(
  v: ConfigValues,
  name: string,
): RedisSequenceSettings | undefined {
  const url = v.optional("redisSequence.url");
  if (url === undefined) {
    if (!v.named("redisSequence.url")) {
      v.missing("redisSequence.url", "the redis sequence is enabled, so Redis's URL is needed");
    }
    return undefined;
  }
  const namespace = v.optional("redisSequence.namespace") ?? name;
  if (!/^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/.test(namespace)) {
    v.problem(
      "redisSequence.namespace",
      `invalid ${v.label("redisSequence.namespace")}: ${describeValue(namespace)}; expected 1 to 128 letters, digits, '.', '_', ':' or '-'`,
    );
  }
  const timeZone = v.get("redisSequence.timeZone");
  try {
    new SequenceIdFormat({ timeZone });
  } catch (error) {
    v.invalid("redisSequence.timeZone", error);
  }
  return {
    url,
    namespace,
    prefix: v.get("redisSequence.prefix"),
    timeZone,
    batchSize: v.optional("redisSequence.batchSize"),
  };
}
