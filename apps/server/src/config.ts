// Loads the server's configuration: defaults, then a file (Java Leaf's leaf.properties, JSON or
// YAML), then programmatic values, then the environment. Every key is checked before anything
// starts; all problems are reported at once, each naming the key as the user wrote it.
import { readFileSync } from "node:fs";
import { extname, resolve } from "node:path";
import {
  defineLayout,
  describeValue,
  ErrorCodes,
  isLeafError,
  type Layout,
  LeafError,
  layouts,
  parseMysqlUrl,
} from "@leaf/core";
import { SequenceIdFormat } from "@leaf/redis-sequence";
import { parseWorkIdMap, type WorkIdMap } from "@leaf/registry-local";
import { parse as parseYaml } from "yaml";
import { CONFIG_KEYS, Expected, findKey, type KeyDef } from "./config-keys";
import { parseProperties } from "./properties";

const COMPONENT = "server";

/** Pino's levels. */
export type LogLevel = "fatal" | "error" | "warn" | "info" | "debug" | "trace" | "silent";

/** A MySQL database as the server connects to it. */
export interface MysqlSettings {
  url: string;
  user: string | undefined;
  /** "" for no password. */
  password: string;
  table: string | undefined;
  createTable: boolean;
}

/** Segment mode settings. */
export interface SegmentSettings {
  store: "embedded" | "mysql";
  /** Folder of the embedded store. */
  dir: string;
  mysql: MysqlSettings | undefined;
  /** Embedded store: tag created when missing; null for none. */
  demoTag: string | null;
  refreshIntervalMs: number;
  exhaustedWaitMs: number;
  dynamicStep: boolean;
}

/** Where the snowflake worker id comes from. */
export type RegistrySettings =
  | { kind: "local"; workerId: number | undefined; workIdMap: unknown; dir: string }
  | {
      kind: "zk";
      address: string;
      mode: "normal" | "recycle";
      sessionTimeoutMs: number;
      stopWithoutSession: boolean;
    }
  | ({ kind: "mysql"; mode: "fixed" | "lease"; leaseMs: number | undefined } & MysqlSettings);

/** Snowflake mode settings. */
export interface SnowflakeSettings {
  layout: Layout;
  registry: RegistrySettings;
  /** Node address in the registry; undefined: the first non-loopback IPv4. */
  ip: string | undefined;
  /** Node port in the registry; undefined: the listening port. */
  port: number | undefined;
  toleranceMs: number;
  backups: number;
}

/** Redis sequence settings. */
export interface RedisSequenceSettings {
  url: string;
  namespace: string;
  prefix: string;
  timeZone: string;
  batchSize: number | undefined;
}

/** The checked configuration of a server. A disabled mode is undefined. */
export interface ServerConfig {
  name: string;
  dataDir: string;
  logLevel: LogLevel;
  server: {
    host: string;
    port: number;
    maxBatch: number;
    adminToken: string | undefined;
    accessTokens: Map<string, string[]> | undefined;
    requestLog: boolean;
    /** Why the server listens where it does, for the start banner. */
    hostReason: string;
    /** ms of drain on SIGTERM before the port closes (see server.drainMs). */
    drainMs: number;
    shutdownTimeoutMs: number;
    monitor: boolean;
  };
  segment: SegmentSettings | undefined;
  snowflake: SnowflakeSettings | undefined;
  redisSequence: RedisSequenceSettings | undefined;
  /** Where values came from, for the start-up log. */
  sources: string[];
  /** Things that were ignored (keys of other programs in a .properties file, unknown LEAF_ variables). */
  warnings: string[];
  /**
   * LEAF_* variables that are not Leaf keys, each with the closest key's variable when one is near
   * (a typo). Ignored when serving; `--check` fails on them.
   */
  unknownVariables: Array<{ name: string; suggestion: string | undefined }>;
}

/** Options of {@link loadConfig}. */
export interface LoadConfigOptions {
  /** A `.properties`, `.json`, `.yaml` or `.yml` file. */
  file?: string;
  /** Values as a JSON/YAML file would hold them (nested or dotted keys); over the file, under the environment. */
  values?: Record<string, unknown>;
  /** The environment (default `process.env`); pass `{}` to ignore it. */
  env?: Record<string, string | undefined>;
  /** Folder relative paths are resolved against (default `process.cwd()`). */
  cwd?: string;
}

interface Entry {
  def: KeyDef;
  /** The name as written: "leaf.jdbc.url", "LEAF_SERVER_PORT". */
  name: string;
  raw: unknown;
  /** "leaf.properties line 3", "environment", ... */
  source: string;
}

interface Problem {
  key: string;
  source?: string;
  value?: unknown;
  expected?: string;
  message: string;
}

/**
 * Reads and checks the configuration. Throws a LeafError INVALID_CONFIG listing every problem,
 * each naming the key as written (and where), the value seen (passwords hidden) and what is expected.
 */
export function loadConfig(options: LoadConfigOptions = {}): ServerConfig {
  const cwd = options.cwd ?? process.cwd();
  const env = options.env ?? process.env;
  const problems: Problem[] = [];
  const warnings: string[] = [];
  const sources: string[] = [];
  const layers: Entry[][] = [];

  let javaLeafFile = false;
  if (options.file !== undefined) {
    const path = resolve(cwd, options.file);
    const entries = readFileEntries(path, problems, warnings);
    // Java Leaf's own leaf.properties: its defaults apply (see build()).
    javaLeafFile =
      extname(path).toLowerCase() === ".properties" &&
      entries.some((e) => e.name.startsWith("leaf."));
    layers.push(entries);
    sources.push(path);
  }
  if (options.values !== undefined) {
    layers.push(objectEntries(options.values, "options", problems));
    sources.push("options");
  }
  const unknownVariables: ServerConfig["unknownVariables"] = [];
  const envLayer = envEntries(env, warnings, unknownVariables);
  if (envLayer.length > 0) sources.push("environment");
  layers.push(envLayer);

  const chosen = new Map<string, Entry>();
  for (const layer of layers) {
    const inLayer = new Map<string, Entry>();
    for (const entry of layer) {
      const earlier = inLayer.get(entry.def.key);
      if (earlier && !sameValue(earlier.raw, entry.raw)) {
        problems.push({
          key: entry.name,
          source: entry.source,
          message:
            `${entry.name} (${entry.source}) and ${earlier.name} (${earlier.source}) set the same key ` +
            `${entry.def.key} to different values; keep one`,
        });
      }
      inLayer.set(entry.def.key, entry);
    }
    for (const [key, entry] of inLayer) chosen.set(key, entry);
  }

  const values = new Map<string, { value: unknown; entry: Entry }>();
  for (const [key, entry] of chosen) {
    try {
      values.set(key, { value: entry.def.read(entry.raw), entry });
    } catch (error) {
      if (!(error instanceof Expected)) throw error;
      problems.push({
        key: entry.name,
        source: entry.source,
        value: entry.def.secret ? "***" : entry.raw,
        expected: error.expected,
        message: `invalid ${nameOf(entry)}: ${entry.def.secret ? "(hidden)" : describeValue(entry.raw)}; expected ${error.expected}`,
      });
    }
  }

  const config = build(values, chosen, cwd, problems, javaLeafFile);
  if (problems.length > 0) throw configProblems(problems);
  config.sources = sources;
  config.warnings = warnings;
  config.unknownVariables = unknownVariables;
  return config;
}

/** "leaf.jdbc.url (leaf.properties line 3)". */
function nameOf(entry: Entry): string {
  return `${entry.name} (${entry.source})`;
}

function configProblems(problems: Problem[]): LeafError {
  const first = problems[0]!;
  const message =
    problems.length === 1
      ? first.message
      : `${problems.length} configuration problems:\n${problems.map((p) => `  - ${p.message}`).join("\n")}`;
  return new LeafError({
    component: COMPONENT,
    code: ErrorCodes.INVALID_CONFIG,
    message,
    details: {
      key: first.key,
      problems: problems.map(({ key, source, value, expected, message }) => ({
        key,
        source,
        value,
        expected,
        message,
      })),
    },
  });
}

function sameValue(a: unknown, b: unknown): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

// ---- sources ----------------------------------------------------------------------------------

function readFileEntries(path: string, problems: Problem[], warnings: string[]): Entry[] {
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
function objectEntries(data: Record<string, unknown>, label: string, problems: Problem[]): Entry[] {
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

function envEntries(
  env: Record<string, string | undefined>,
  warnings: string[],
  unknown: ServerConfig["unknownVariables"],
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

// ---- the checked configuration ----------------------------------------------------------------

function build(
  values: Map<string, { value: unknown; entry: Entry }>,
  chosen: Map<string, Entry>,
  cwd: string,
  problems: Problem[],
  javaLeafFile: boolean,
): ServerConfig {
  const get = <T>(key: string, fallback: T): T =>
    values.has(key) ? (values.get(key)!.value as T) : fallback;
  const has = (key: string) => values.has(key);
  /** How to name a key in a message: as the user wrote it, or every name it has. */
  const label = (key: string) => {
    const entry = chosen.get(key);
    if (entry) return nameOf(entry);
    const def = findKey(key)!;
    return [def.key, ...def.aliases, def.env].join(" / ");
  };
  const missing = (key: string, why: string) =>
    problems.push({ key, message: `missing ${label(key)}: ${why}` });

  const name = get("name", "leaf");
  const dataDir = resolve(cwd, get("dataDir", "./.leaf-data"));

  // Where to listen. A configuration that names a shared store or registry is a deployment that
  // other hosts call: every interface, as Java Leaf (Spring Boot) does. Otherwise the zero-config
  // demo: loopback only.
  const external = [
    "segment.mysql.url",
    "snowflake.zk.address",
    "snowflake.mysql.url",
    "redisSequence.url",
  ].filter((key) => chosen.has(key));
  const host = get<string>("server.host", external.length > 0 ? "0.0.0.0" : "127.0.0.1");
  const hostReason = has("server.host")
    ? `set by ${label("server.host")}`
    : external.length > 0
      ? `every interface, as Java Leaf: the configuration names a shared store or registry (${external.map((k) => chosen.get(k)!.name).join(", ")}); set server.host to change`
      : "loopback only: no shared store or registry is configured (demo set-up); set server.host=0.0.0.0 to serve other hosts";
  const loopback = isLoopbackHost(host);

  // Segment mode.
  let segment: SegmentSettings | undefined;
  if (get("segment.enabled", true)) {
    const store = get<"embedded" | "mysql">(
      "segment.store",
      has("segment.mysql.url") || chosen.has("segment.mysql.url") ? "mysql" : "embedded",
    );
    if (store === "embedded" && !has("segment.store") && (javaLeafFile || !loopback)) {
      // Each node with its own embedded store hands out the same ids: only one node may use it.
      problems.push({
        key: "segment.store",
        message: javaLeafFile
          ? `segment mode is on (${chosen.has("segment.enabled") ? label("segment.enabled") : "leaf.segment.enable defaults to true in Java Leaf"}) but no leaf.jdbc.url is set. ` +
            "Set leaf.jdbc.url, or leaf.segment.enable=false, or segment.store=embedded for one single node (two nodes with their own embedded stores hand out the same ids)"
          : `segment mode would use the embedded store while listening on ${host}, reachable from other hosts: ` +
            "set segment.mysql.url (leaf.jdbc.url) for a shared store, or segment.store=embedded to confirm this is the only node serving these tags",
      });
    }
    let mysql: MysqlSettings | undefined;
    if (store === "mysql") {
      if (!has("segment.mysql.url") && !chosen.has("segment.mysql.url")) {
        missing("segment.mysql.url", "segment.store is mysql, so the database URL is needed");
      } else if (has("segment.mysql.url")) {
        mysql = mysqlSettings(
          get("segment.mysql.url", ""),
          get<string | undefined>("segment.mysql.username", undefined),
          get<string | undefined>("segment.mysql.password", undefined),
          {
            url: "segment.mysql.url",
            user: "segment.mysql.username",
            password: "segment.mysql.password",
          },
          label,
          problems,
        );
        if (mysql) {
          mysql.table = get<string | undefined>("segment.mysql.table", undefined);
          mysql.createTable = get("segment.mysql.createTable", false);
        }
      }
    }
    const demoTag = get<string>("segment.demoTag", "leaf-segment-test");
    segment = {
      store,
      dir: resolve(dataDir, "segments"),
      mysql,
      demoTag: demoTag === "" ? null : demoTag,
      refreshIntervalMs: get("segment.refreshIntervalMs", 60_000),
      exhaustedWaitMs: get("segment.exhaustedWaitMs", 1_000),
      dynamicStep: get("segment.dynamicStep", true),
    };
  }

  // Snowflake mode.
  let snowflake: SnowflakeSettings | undefined;
  if (get("snowflake.enabled", true)) {
    const chosenRegistry = get<
      { registry: "local" | "zk" | "mysql"; zkMode?: "normal" | "recycle" } | undefined
    >("snowflake.registry", undefined);
    const kind =
      chosenRegistry?.registry ??
      (has("snowflake.zk.address") || chosen.has("snowflake.zk.address") ? "zk" : "local");
    let registry: RegistrySettings | undefined;
    const explicitLocalId = has("snowflake.local.workerId") || has("snowflake.local.workIdMap");
    if (kind === "local" && javaLeafFile && !chosenRegistry) {
      problems.push({
        key: "snowflake.zk.address",
        message:
          `snowflake mode is on (${chosen.has("snowflake.enabled") ? label("snowflake.enabled") : "leaf.snowflake.enable defaults to true in Java Leaf"}) but no leaf.snowflake.zk.address is set. ` +
          "Set leaf.snowflake.zk.address and leaf.snowflake.port, or leaf.snowflake.enable=false, or choose a registry with leaf.snowflake.mode (local needs snowflake.local.workerId or leaf.snowflake.local.workIdMap)",
      });
    } else if (kind === "local" && !loopback && !explicitLocalId) {
      problems.push({
        key: "snowflake.local.workerId",
        message:
          `snowflake mode would use the local registry's default worker id 0 while listening on ${host}, reachable from other hosts; two nodes started like this hand out the same ids. ` +
          "Give each node its own id with snowflake.local.workerId (or leaf.snowflake.local.workIdMap), or use a registry (leaf.snowflake.zk.address, snowflake.registry=mysql)",
      });
    }
    if (kind === "local") {
      const workIdMap = get<unknown>("snowflake.local.workIdMap", undefined);
      if (workIdMap !== undefined && has("snowflake.local.workerId")) {
        problems.push({
          key: "snowflake.local.workerId",
          message: `${label("snowflake.local.workerId")} and ${label("snowflake.local.workIdMap")} are both set; keep one`,
        });
      }
      if (workIdMap !== undefined) {
        try {
          parseWorkIdMap(workIdMap as WorkIdMap, "workIdMap");
        } catch (error) {
          problems.push({
            key: "snowflake.local.workIdMap",
            message: `invalid ${label("snowflake.local.workIdMap")}: ${(error as Error).message.replace(/^\[leaf\] \[[^\]]+\] /, "")}`,
          });
        }
      }
      registry = {
        kind,
        workerId: workIdMap === undefined ? get("snowflake.local.workerId", 0) : undefined,
        workIdMap,
        dir: resolve(cwd, get("snowflake.local.dir", resolve(dataDir, "registry-local"))),
      };
    } else if (kind === "zk") {
      if (!has("snowflake.zk.address")) {
        if (!chosen.has("snowflake.zk.address")) {
          missing(
            "snowflake.zk.address",
            "the snowflake registry is zk, so ZooKeeper's address is needed",
          );
        }
      } else {
        registry = {
          kind,
          address: get("snowflake.zk.address", ""),
          mode: get("snowflake.zk.mode", chosenRegistry?.zkMode ?? "normal"),
          sessionTimeoutMs: get("snowflake.zk.sessionTimeoutMs", 6_000),
          stopWithoutSession: get("snowflake.zk.stopWithoutSession", false),
        };
      }
    } else {
      const urlKey = has("snowflake.mysql.url") ? "snowflake.mysql.url" : "segment.mysql.url";
      if (!has(urlKey)) {
        if (!chosen.has(urlKey)) {
          missing(
            "snowflake.mysql.url",
            "the snowflake registry is mysql, so a database URL is needed (snowflake.mysql.url, or the segment's leaf.jdbc.url)",
          );
        }
      } else {
        const userKey = has("snowflake.mysql.username")
          ? "snowflake.mysql.username"
          : "segment.mysql.username";
        const passwordKey = has("snowflake.mysql.password")
          ? "snowflake.mysql.password"
          : "segment.mysql.password";
        const settings = mysqlSettings(
          get(urlKey, ""),
          get<string | undefined>(userKey, undefined),
          get<string | undefined>(passwordKey, undefined),
          { url: urlKey, user: userKey, password: "snowflake.mysql.password" },
          label,
          problems,
        );
        if (settings) {
          registry = {
            kind,
            mode: get("snowflake.mysql.mode", "fixed"),
            leaseMs: get<number | undefined>("snowflake.mysql.leaseMs", undefined),
            ...settings,
            table: undefined,
            createTable: get("snowflake.mysql.createTable", false),
          };
        }
      }
    }
    const layout = buildLayout(get, label, problems);
    if (registry && layout) {
      snowflake = {
        layout,
        registry,
        ip: get<string | undefined>("snowflake.ip", undefined),
        port: get<number | undefined>("snowflake.port", undefined),
        toleranceMs: get("snowflake.clockToleranceMs", 5),
        backups: get("snowflake.backups", 0),
      };
    }
  }

  // Redis sequence.
  let redisSequence: RedisSequenceSettings | undefined;
  if (get("redisSequence.enabled", has("redisSequence.url") || chosen.has("redisSequence.url"))) {
    if (!has("redisSequence.url")) {
      if (!chosen.has("redisSequence.url")) {
        missing("redisSequence.url", "the redis sequence is enabled, so Redis's URL is needed");
      }
    } else {
      const namespace = get("redisSequence.namespace", name);
      if (!/^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/.test(namespace)) {
        problems.push({
          key: "redisSequence.namespace",
          message: `invalid ${label("redisSequence.namespace")}: ${describeValue(namespace)}; expected 1 to 128 letters, digits, '.', '_', ':' or '-'`,
        });
      }
      const timeZone = get("redisSequence.timeZone", "UTC");
      try {
        new SequenceIdFormat({ timeZone });
      } catch (error) {
        problems.push({
          key: "redisSequence.timeZone",
          message: `invalid ${label("redisSequence.timeZone")}: ${(error as Error).message.replace(/^\[leaf\] \[[^\]]+\] /, "")}`,
        });
      }
      redisSequence = {
        url: get("redisSequence.url", ""),
        namespace,
        prefix: get("redisSequence.prefix", ""),
        timeZone,
        batchSize: get<number | undefined>("redisSequence.batchSize", undefined),
      };
    }
  }

  const wantSegment = get("segment.enabled", true);
  const wantSnowflake = get("snowflake.enabled", true);
  const wantRedis = get("redisSequence.enabled", chosen.has("redisSequence.url"));
  if (!wantSegment && !wantSnowflake && !wantRedis) {
    problems.push({
      key: "segment.enabled",
      message:
        "every mode is disabled (segment.enabled, snowflake.enabled and redisSequence.enabled are false): the server would have nothing to serve; enable at least one",
    });
  }

  return {
    name,
    dataDir,
    logLevel: get("log.level", "info"),
    server: {
      host,
      hostReason,
      port: get("server.port", 8080),
      maxBatch: get("server.maxBatch", 10_000),
      adminToken: get<string | undefined>("server.adminToken", undefined),
      accessTokens: get<Map<string, string[]> | undefined>("server.accessTokens", undefined),
      requestLog: get("server.requestLog", false),
      drainMs: get("server.drainMs", 5000),
      shutdownTimeoutMs: get("server.shutdownTimeoutMs", 10_000),
      monitor: get("server.monitor", true),
    },
    segment,
    snowflake,
    redisSequence,
    sources: [],
    warnings: [],
    unknownVariables: [],
  };
}

function mysqlSettings(
  url: string,
  user: string | undefined,
  password: string | undefined,
  keys: { url: string; user: string; password: string },
  label: (key: string) => string,
  problems: Problem[],
): MysqlSettings | undefined {
  let parsed: ReturnType<typeof parseMysqlUrl>;
  try {
    parsed = parseMysqlUrl(url, { key: keys.url, component: COMPONENT });
  } catch (error) {
    problems.push({
      key: keys.url,
      message: `invalid ${label(keys.url)}: ${(error as Error).message}`,
    });
    return undefined;
  }
  let ok = true;
  if (parsed.database === undefined) {
    problems.push({
      key: keys.url,
      message: `invalid ${label(keys.url)}: the URL names no database; expected jdbc:mysql://host:3306/leaf (the path is the database)`,
    });
    ok = false;
  }
  const finalUser = user ?? parsed.user;
  if (finalUser === undefined) {
    problems.push({
      key: keys.user,
      message: `missing ${label(keys.user)}: the database URL has no user, so the user name is needed`,
    });
    ok = false;
  }
  const finalPassword = password ?? parsed.password;
  if (finalPassword === undefined) {
    problems.push({
      key: keys.password,
      message: `missing ${label(keys.password)}: a database is configured, so its password is needed (set it empty for a user without a password)`,
    });
    ok = false;
  }
  if (!ok) return undefined;
  return { url, user: finalUser, password: finalPassword!, table: undefined, createTable: false };
}

function buildLayout(
  get: <T>(key: string, fallback: T) => T,
  label: (key: string) => string,
  problems: Problem[],
): Layout | undefined {
  const base = layouts[get<"leaf" | "sonyflake" | "baidu">("snowflake.layout", "leaf")];
  const fields = {
    name: base.name,
    timestampBits: get("snowflake.timestampBits", base.timestampBits),
    workerBits: get("snowflake.workerBits", base.workerBits),
    sequenceBits: get("snowflake.sequenceBits", base.sequenceBits),
    unitMillis: get("snowflake.unitMillis", base.unitMillis),
    epoch: get("snowflake.epoch", base.epoch),
  };
  if (
    fields.epoch === base.epoch &&
    fields.timestampBits === base.timestampBits &&
    fields.workerBits === base.workerBits &&
    fields.sequenceBits === base.sequenceBits &&
    fields.unitMillis === base.unitMillis
  ) {
    return base;
  }
  try {
    return defineLayout({ ...fields, name: `${base.name} (custom)` });
  } catch (error) {
    const field = isLeafError(error) ? String(error.details.key ?? "") : "";
    const key =
      field === "epoch" ||
      field === "unitMillis" ||
      field === "timestampBits" ||
      field === "workerBits" ||
      field === "sequenceBits"
        ? `snowflake.${field}`
        : "snowflake.timestampBits";
    problems.push({
      key,
      message: `invalid snowflake layout (${label(key)}): ${(error as Error).message.replace(/^\[leaf\] \[core\] /, "")}`,
    });
    return undefined;
  }
}

/** True for addresses only this machine can reach: 127.0.0.0/8, ::1 and "localhost". */
function isLoopbackHost(host: string): boolean {
  return host === "localhost" || host === "::1" || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(host);
}
