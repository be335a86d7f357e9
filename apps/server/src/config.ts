// Loads the server's configuration: defaults, then a file (Java Leaf's leaf.properties, JSON or
// YAML), then programmatic values, then the environment. Every key is checked before anything
// starts; all problems are reported at once, each naming the key as the user wrote it. Each
// section is built in its own file (config-server, -segment, -snowflake, -redis).
import { extname, resolve } from "node:path";
import { describeValue, ErrorCodes, LeafError } from "@leaf/core";
import { registryBackend, SEGMENT_STORES } from "./backends/index";
import type { ConfigKey } from "./config-keys";
import { Expected } from "./config-readers";
import { redisSequenceEnabled, redisSequenceSettings } from "./config-redis";
import { segmentSettings } from "./config-segment";
import { isLoopbackHost, serverSettings } from "./config-server";
import { snowflakeSettings } from "./config-snowflake";
import { envEntries, objectEntries, readFileEntries } from "./config-sources";
import type { SegmentSettings, ServerConfig, SnowflakeSettings } from "./config-types";
import { ConfigValues, type Entry, nameOf, type Problem } from "./config-values";

export type {
  LogLevel,
  RedisSequenceSettings,
  RegistrySettings,
  SegmentSettings,
  ServerConfig,
  SnowflakeSettings,
  StoreSettings,
} from "./config-types";

const COMPONENT = "server";

/** Options of {@link loadConfig}. */
export interface LoadConfigOptions {
  /** A `.properties`, `.json`, `.yaml` or `.yml` file. */
  file?: string;
  /**
   * Values as a JSON/YAML file would hold them (nested or dotted keys); over the file, under the
   * environment.
   */
  values?: Record<string, unknown>;
  /** The environment (default `process.env`); pass `{}` to ignore it. */
  env?: Record<string, string | undefined>;
  /** Folder relative paths are resolved against (default `process.cwd()`). */
  cwd?: string;
}

/**
 * Reads and checks the configuration. Throws a LeafError INVALID_CONFIG listing every problem, each
 * naming the key as written (and where), the value seen (passwords hidden) and what is expected.
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
    // Java Leaf's own leaf.properties: its defaults apply (see config-segment.ts,
    // config-snowflake.ts).
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
        value: entry.def.secret ? "***" : shown(entry),
        expected: error.expected,
        message: `invalid ${nameOf(entry)}: ${entry.def.secret ? "(hidden)" : describeValue(shown(entry))}; expected ${error.expected}`,
      });
    }
  }

  const config = build(new ConfigValues(values, chosen, problems, cwd, javaLeafFile, env));
  if (problems.length > 0) throw configProblems(problems);
  config.sources = sources;
  config.warnings = warnings;
  config.unknownVariables = unknownVariables;
  return config;
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

/** The value of `entry` as a message may show it (a URL's password hidden). */
function shown(entry: Entry): unknown {
  return entry.def.redact ? entry.def.redact(entry.raw) : entry.raw;
}

function sameValue(a: unknown, b: unknown): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

/**
 * Another store's address named beside the store in use would be ignored, and two servers each
 * believing they share that store would hand out the same ids from their own: refused, as two
 * registries' addresses are. An address the registry reads (its database defaulting to the segment
 * store's) is not ignored.
 */
function refuseIgnoredStores(
  v: ConfigValues,
  segment: SegmentSettings,
  snowflake: SnowflakeSettings | undefined,
): void {
  const borrowed = snowflake ? (registryBackend(snowflake.registry.kind).borrows ?? []) : [];
  const ignored = SEGMENT_STORES.filter((store) => store.kind !== segment.store)
    .flatMap((store) => store.addressKeys as readonly ConfigKey[])
    .filter((key) => v.named(key) && !borrowed.includes(key));
  if (ignored.length === 0) return;
  const chosen = v.named("segment.store")
    ? `${v.label("segment.store")} chooses the ${segment.store} store`
    : `the configuration chooses the ${segment.store} store`;
  v.problem(
    ignored[0]!,
    `${chosen}, but ${ignored.map((k) => v.label(k)).join(", ")} names another store, which would be ignored (two servers configured like this would each serve the same ids from their own store); ` +
      `remove ${ignored.length > 1 ? "them" : "it"}, or choose that store with segment.store`,
  );
}

/** The checked configuration from the read values; problems are noted in `v`. */
function build(v: ConfigValues): ServerConfig {
  const base = serverSettings(v);
  const host = base.server.host;
  const at = { dataDir: base.dataDir, host, loopback: isLoopbackHost(host) };
  const wantSegment = v.get("segment.enabled");
  const wantSnowflake = v.get("snowflake.enabled");
  const wantRedis = redisSequenceEnabled(v);
  const segment = wantSegment ? segmentSettings(v, at) : undefined;
  const snowflake = wantSnowflake ? snowflakeSettings(v, at) : undefined;
  const redisSequence = wantRedis ? redisSequenceSettings(v, base.name) : undefined;
  if (segment && (snowflake || !wantSnowflake)) refuseIgnoredStores(v, segment, snowflake);
  if (!wantSegment && !wantSnowflake && !wantRedis) {
    v.problem(
      "segment.enabled",
      "every mode is disabled (segment.enabled, snowflake.enabled and redisSequence.enabled are false): the server would have nothing to serve; enable at least one",
    );
  }
  return {
    ...base,
    segment,
    snowflake,
    redisSequence,
    sources: [],
    warnings: [],
    unknownVariables: [],
  };
}
