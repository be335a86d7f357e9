// How a configuration key is defined: its canonical dotted name (JSON/YAML path), environment
// variable, Java Leaf / fork aliases, how its value is read and its default. The server's own keys
// are in config-keys.ts, each backend's with its entry in backends/.

/** One configuration key. */
export interface KeyDef<T = unknown> {
  /** Canonical name, the path in a JSON or YAML file: "server.port". */
  key: string;
  /** Environment variable: "LEAF_SERVER_PORT". */
  env: string;
  /**
   * Other names accepted in files and (as LEAF_... variables) in the environment: Java Leaf's keys.
   */
  aliases: readonly string[];
  /** Short description of the accepted values, for errors and the README. */
  type: string;
  /**
   * The value the loader uses when the key is not set. Absent when the default is worked out from
   * other keys, or left to the package the setting is passed to: `defaultText` then says what it
   * is.
   */
  default?: T;
  /** The default as the README's table states it; `default` written out unless given. */
  defaultText: string;
  /** What the key does. */
  doc: string;
  /** Hidden in messages and logs. */
  secret?: boolean;
  /** The value as messages may show it (a URL with its password replaced); as written otherwise. */
  redact?(raw: unknown): unknown;
  /** Reads a raw value (a string from .properties or the environment, or a JSON/YAML value). */
  read(raw: unknown): T;
}

/** "redisSequence.batchSize" -> "LEAF_REDIS_SEQUENCE_BATCH_SIZE". */
export function envName(key: string): string {
  return `LEAF_${key
    .replace(/([a-z0-9])([A-Z])/g, "$1_$2")
    .replace(/[.-]/g, "_")
    .toUpperCase()}`;
}

/** `key (ENV_NAME)`: how an operator finds a setting. */
export function keyText(key: string): string {
  return `${key} (${envName(key)})`;
}

type KeyOptions<T> = Omit<KeyDef<T>, "key" | "env" | "aliases" | "default" | "defaultText"> & {
  aliases?: string[];
};

/** How the README writes a default value: as is, `""` for the empty string. */
export function showDefault(value: unknown): string {
  return value === "" ? '""' : String(value);
}

/** A key whose default is a value (`defaultText` only to say more than the value). */
export function def<K extends string, T>(
  key: K,
  options: KeyOptions<T> & { default: NoInfer<T>; defaultText?: string },
): KeyDef<T> & { key: K; default: T };
/** A key whose default is worked out from other keys, or left to a package: text only. */
export function def<K extends string, T>(
  key: K,
  options: KeyOptions<T> & { defaultText: string },
): KeyDef<T> & { key: K };
export function def<K extends string, T>(
  key: K,
  options: KeyOptions<T> & { default?: T; defaultText?: string },
): KeyDef<T> & { key: K } {
  return {
    key,
    env: envName(key),
    ...options,
    aliases: options.aliases ?? [],
    defaultText: options.defaultText ?? showDefault(options.default),
  };
}

/**
 * `text` with the password of every URL in it replaced by "***" (`mysql://u:pw@h/db` ->
 * `mysql://u:***@h/db`), for messages and fingerprints; other values as they are.
 */
export function hideUrlPasswords(value: unknown): unknown {
  return typeof value === "string" ? value.replace(/(\/\/[^:@/\s]*:)[^@/\s]*@/g, "$1***@") : value;
}
