// Where configuration values come from: a file (Java Leaf's leaf.properties, JSON or YAML), a
// nested object of values, and LEAF_* environment variables; unknown keys get the nearest key.
import { readFileSync } from "node:fs";
import { extname } from "node:path";
import { describeValue, ErrorCodes, isLeafError, LeafError } from "@leaf/core";
import { parse as parseYaml } from "yaml";
import { CONFIG_KEYS, findKey, type KeyDef } from "./config-keys";
import type { Entry, Problem } from "./config-values";
import { parseProperties } from "./properties";

const COMPONENT = "server";

/** The entries of a configuration file, by its extension. */
export function readFileEntries(path: string, problems: Problem[], warnings: string[]): Entry[] {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (error) {
    throw new LeafError({
      component: COMPONENT,
      code: ErrorCodes.INVALID_CONFIG,
      message: `cannot read the configuration file ${path}: ${(error as Error).message}`,
      details: { key: "--config", value: path },
      cause: error,
    });
  }
  const ext = extname(path).toLowerCase();
  const label = path;
  if (ext === ".properties") {
    const entries: Entry[] = [];
    for (const { key, value, line } of parseProperties(text)) {
      const def = findKey(key);
      const source = `${label} line ${line}`;
      if (def) entries.push({ def, name: key, raw: value, source });
      else if (/^(leaf|server|segment|snowflake|redisSequence|log)\./.test(key) || key === "name") {
        problems.push({ key, source, message: unknownKeyMessage(key, source) });
      } else {
        warnings.push(`ignored key ${key} (${source}): not a Leaf key`);
      }
    }
    return entries;
  }
  let data: unknown;
  try {
    if (ext === ".json") data = JSON.parse(text);
    else if (ext === ".yaml" || ext === ".yml") data = parseYaml(text);
    else {
      throw new LeafError({
        component: COMPONENT,
        code: ErrorCodes.INVALID_CONFIG,
        message: `unsupported configuration file ${path}: expected a .properties, .json, .yaml or .yml file`,
        details: { key: "--config", value: path },
      });
    }
  } catch (error) {
    if (isLeafError(error)) throw error;
    throw new LeafError({
      component: COMPONENT,
      code: ErrorCodes.INVALID_CONFIG,
      message: `the configuration file ${path} is not valid ${ext === ".json" ? "JSON" : "YAML"}: ${(error as Error).message}`,
      details: { key: "--config", value: path },
      cause: error,
    });
  }
  if (data === null || data === undefined) return [];
  if (typeof data !== "object" || Array.isArray(data)) {
    throw new LeafError({
      component: COMPONENT,
      code: ErrorCodes.INVALID_CONFIG,
      message: `the configuration file ${path} must hold an object of keys, not ${describeValue(data)}`,
      details: { key: "--config", value: path },
    });
  }
  return objectEntries(data as Record<string, unknown>, label, problems);
}

/** Walks a nested object: a path that names a key is a value; other objects are walked into. */
export function objectEntries(
  data: Record<string, unknown>,
  label: string,
  problems: Problem[],
): Entry[] {
  const entries: Entry[] = [];
  const walk = (object: Record<string, unknown>, prefix: string) => {
    for (const [k, value] of Object.entries(object)) {
      const path = prefix === "" ? k : `${prefix}.${k}`;
      const def = findKey(path);
      if (def) {
        if (value !== undefined) entries.push({ def, name: path, raw: value, source: label });
      } else if (typeof value === "object" && value !== null && !Array.isArray(value)) {
        walk(value as Record<string, unknown>, path);
      } else {
        problems.push({ key: path, source: label, message: unknownKeyMessage(path, label) });
      }
    }
  };
  walk(data, "");
  return entries;
}

/** The LEAF_* variables that are keys; the others are noted, with the nearest key's variable. */
export function envEntries(
  env: Record<string, string | undefined>,
  warnings: string[],
  unknown: Array<{ name: string; suggestion: string | undefined }>,
): Entry[] {
  const byName = new Map<string, KeyDef>();
  for (const def of CONFIG_KEYS as readonly KeyDef[]) {
    byName.set(def.env, def);
    for (const alias of def.aliases) {
      if (alias.startsWith("leaf.")) byName.set(alias.replace(/\./g, "_").toUpperCase(), def);
    }
  }
  const entries: Entry[] = [];
  for (const [name, value] of Object.entries(env)) {
    if (value === undefined || !name.startsWith("LEAF_")) continue;
    const def = byName.get(name);
    if (def) entries.push({ def, name, raw: value, source: "environment" });
    else if (!name.startsWith("LEAF_TEST_") && name !== "LEAF_CONFIG") {
      const suggestion = closest(name, [...byName.keys(), "LEAF_CONFIG"]);
      unknown.push({ name, suggestion });
      warnings.push(
        `ignored environment variable ${name}: not a Leaf key${suggestion ? `; did you mean ${suggestion}?` : ""}`,
      );
    }
  }
  return entries;
}

/** The name in `names` nearest to `name` when it is near enough to be a typo of it. */
function closest(name: string, names: readonly string[]): string | undefined {
  let best: string | undefined;
  let bestDistance = Number.POSITIVE_INFINITY;
  for (const candidate of names) {
    const d = distance(name.toLowerCase(), candidate.toLowerCase());
    if (d < bestDistance) {
      bestDistance = d;
      best = candidate;
    }
  }
  return best !== undefined && bestDistance <= Math.max(2, name.length / 4) ? best : undefined;
}

function unknownKeyMessage(key: string, source: string): string {
  const names = (CONFIG_KEYS as readonly KeyDef[]).flatMap((d) => [d.key, ...d.aliases]);
  const best = closest(key, names);
  const hint = best !== undefined ? `; did you mean ${best}?` : "";
  return `unknown configuration key ${key} (${source})${hint} See the README's table of keys`;
}

function distance(a: string, b: string): number {
  const row = Array.from({ length: b.length + 1 }, (_, i) => i);
  for (let i = 1; i <= a.length; i++) {
    let previous = row[0]!;
    row[0] = i;
    for (let j = 1; j <= b.length; j++) {
      const current = row[j]!;
      row[j] = Math.min(row[j]! + 1, row[j - 1]! + 1, previous + (a[i - 1] === b[j - 1] ? 0 : 1));
      previous = current;
    }
  }
  return row[b.length]!;
}
