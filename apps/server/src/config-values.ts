// The values the configuration loader read, as the section builders see them: typed by key, with
// the key table's default for a key that is not set, and the problems found so far.
import { bareMessage } from "@leaf/core/adapter";
import {
  type ConfigKey,
  type DefaultedKey,
  findKey,
  type KeyDef,
  type ValueOf,
} from "./config-keys";

/** One key as a source wrote it. */
export interface Entry {
  def: KeyDef;
  /** The name as written: "leaf.jdbc.url", "LEAF_SERVER_PORT". */
  name: string;
  raw: unknown;
  /** "leaf.properties line 3", "environment", ... */
  source: string;
}

/** One configuration problem; loadConfig() reports them all at once. */
export interface Problem {
  key: string;
  source?: string;
  value?: unknown;
  expected?: string;
  message: string;
}

/** "leaf.jdbc.url (leaf.properties line 3)". */
export function nameOf(entry: Entry): string {
  return `${entry.name} (${entry.source})`;
}

/** The read values of one load, and where to note problems. */
export class ConfigValues {
  constructor(
    private readonly values: ReadonlyMap<string, { value: unknown; entry: Entry }>,
    private readonly chosen: ReadonlyMap<string, Entry>,
    private readonly problems: Problem[],
    /** Folder relative paths are resolved against. */
    readonly cwd: string,
    /** True when the file is Java Leaf's own leaf.properties: its defaults apply. */
    readonly javaLeafFile: boolean,
    /** The environment of this load (HOSTNAME names a StatefulSet's pod). */
    readonly env: Readonly<Record<string, string | undefined>> = {},
  ) {}

  /** The key's value, or the key table's default when it is not set. */
  get<K extends DefaultedKey>(key: K): ValueOf<K> {
    const set = this.values.get(key);
    return (set ? set.value : findKey(key)!.default) as ValueOf<K>;
  }

  /** The key's value; undefined when it is not set (or set to something invalid). */
  optional<K extends ConfigKey>(key: K): ValueOf<K> | undefined {
    return this.values.get(key)?.value as ValueOf<K> | undefined;
  }

  /** True when the key holds a valid value. */
  has(key: ConfigKey): boolean {
    return this.values.has(key);
  }

  /** True when a source names the key, valid or not. */
  named(key: ConfigKey): boolean {
    return this.chosen.has(key);
  }

  /** The key's name as a source wrote it ("leaf.jdbc.url"); undefined when none does. */
  writtenName(key: ConfigKey): string | undefined {
    return this.chosen.get(key)?.name;
  }

  /** The key's value as a source wrote it, before reading ("auto", "3"); undefined when unset. */
  writtenValue(key: ConfigKey): unknown {
    return this.chosen.get(key)?.raw;
  }

  /** How to name a key in a message: as the user wrote it, or every name it has. */
  label(key: ConfigKey): string {
    const entry = this.chosen.get(key);
    if (entry) return nameOf(entry);
    const def = findKey(key)!;
    return [def.key, ...def.aliases, def.env].join(" / ");
  }

  /** Notes a problem with `key`. */
  problem(key: ConfigKey, message: string): void {
    this.problems.push({ key, message });
  }

  /** Notes that `key` is needed and why. */
  missing(key: ConfigKey, why: string): void {
    this.problem(key, `missing ${this.label(key)}: ${why}`);
  }

  /** Notes that `key`'s value was refused by the check that threw `error`. */
  invalid(key: ConfigKey, error: unknown): void {
    this.problem(key, `invalid ${this.label(key)}: ${bareMessage(error)}`);
  }
}
