// The names an adapter's Redis keys are built from: a namespace that becomes the Redis Cluster hash
// tag `{namespace}` of every key (so one script may use them all: one slot), and a key prefix
// before it. Checked alike by every adapter that names its keys so (redis-sequence, segment-redis).
import { configError } from "@leaf/core";

const NAMESPACE = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/;
const PREFIX = /^[A-Za-z0-9._:-]{0,64}$/;

/**
 * Checks a namespace (option `namespace`): 1 to 128 characters, letters, digits and `. _ : -`,
 * starting with a letter or digit. Throws INVALID_CONFIG naming the key otherwise.
 */
export function checkRedisNamespace(component: string, namespace: unknown): string {
  if (typeof namespace !== "string" || !NAMESPACE.test(namespace)) {
    throw configError(
      component,
      "namespace",
      namespace,
      "1 to 128 characters of letters, digits, '.', '_', ':' or '-', starting with a letter or " +
        "digit (no braces or spaces: it becomes the Redis Cluster hash tag {namespace})",
    );
  }
  return namespace;
}

/**
 * Checks a key prefix (option `keyPrefix`): up to 64 characters, letters, digits and `. _ : -` (no
 * braces: the hash tag must be the namespace). Throws INVALID_CONFIG naming the key otherwise.
 */
export function checkRedisKeyPrefix(component: string, keyPrefix: unknown): string {
  if (typeof keyPrefix !== "string" || !PREFIX.test(keyPrefix)) {
    throw configError(
      component,
      "keyPrefix",
      keyPrefix,
      "up to 64 characters of letters, digits, '.', '_', ':' or '-' (no braces: the hash tag must be the namespace)",
    );
  }
  return keyPrefix;
}
