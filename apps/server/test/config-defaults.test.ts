// Each key's default is written once, in the key table: the loader uses that value, and the
// README's table shows the key table's text for it.
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { showDefault } from "../src/config-keys";
import { CONFIG_KEYS, type KeyDef, loadConfig, type ServerConfig } from "../src/index";

const dir = mkdtempSync(join(tmpdir(), "leaf-config-defaults-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const load = (values: Record<string, unknown>) => loadConfig({ values, env: {}, cwd: dir });
const DATABASE = "mysql://leaf:secret@127.0.0.1:3306/leaf";

/** Configurations that set nothing but what makes a mode's keys apply. */
const plain = load({});
const zk = load({ segment: { enabled: false }, snowflake: { zk: { address: "127.0.0.1:2181" } } });
const mysql = load({ segment: { mysql: { url: DATABASE } }, snowflake: { registry: "mysql" } });
const postgres = load({
  segment: { postgres: { url: "postgres://leaf:secret@127.0.0.1:5432/leaf" } },
  snowflake: { registry: "postgres" },
});
const redisStore = load({
  segment: { redis: { url: "redis://127.0.0.1:6379" } },
  snowflake: { enabled: false },
});
const residue = load({
  segment: { residue: { members: [DATABASE, "postgres://leaf:secret@127.0.0.1:5432/leaf"] } },
  snowflake: { enabled: false },
});
const pod = loadConfig({
  values: { segment: { enabled: false }, snowflake: { statefulSet: true } },
  env: { HOSTNAME: "leaf-2" },
  cwd: dir,
});
const redis = load({
  segment: { enabled: false },
  snowflake: { enabled: false },
  redisSequence: { url: "redis://127.0.0.1:6379" },
});

/** Where each key with a default value ends up in a configuration that does not set it. */
const WHERE: Record<string, () => unknown> = {
  name: () => plain.name,
  dataDir: () => plain.dataDir,
  "log.level": () => plain.logLevel,
  "server.port": () => plain.server.port,
  "server.maxBatch": () => plain.server.maxBatch,
  "server.requestLog": () => plain.server.requestLog,
  "server.drainMs": () => plain.server.drainMs,
  "server.shutdownTimeoutMs": () => plain.server.shutdownTimeoutMs,
  "server.monitor": () => plain.server.monitor,
  "server.workers": () => plain.server.workers,
  "segment.enabled": () => plain.segment !== undefined,
  "segment.mysql.createTable": () => store(mysql, "mysql")?.createTable,
  "segment.postgres.createTable": () => store(postgres, "postgres")?.createTable,
  "segment.redis.waitReplicas": () => store(redisStore, "redis")?.waitReplicas,
  "segment.residue.createTable": () => store(residue, "residue")?.createTable,
  "segment.residue.hedgeMs": () => store(residue, "residue")?.hedgeMs,
  "segment.demoTag": () => store(plain, "embedded")?.demoTag,
  "segment.refreshIntervalMs": () => plain.segment?.refreshIntervalMs,
  "segment.exhaustedWaitMs": () => plain.segment?.exhaustedWaitMs,
  "segment.dynamicStep": () => plain.segment?.dynamicStep,
  "segment.prefetchMaxDepth": () => plain.segment?.prefetchMaxDepth,
  "segment.giveBackOnClose": () => plain.segment?.giveBackOnClose,
  "segment.load": () => plain.segment?.load,
  "segment.eagerTags": () => plain.segment?.eagerTags,
  "segment.recentMs": () => plain.segment?.recentMs,
  "snowflake.enabled": () => plain.snowflake !== undefined,
  "snowflake.layout": () => plain.snowflake?.layout.name,
  "snowflake.clockToleranceMs": () => plain.snowflake?.toleranceMs,
  "snowflake.backups": () => plain.snowflake?.backups,
  "snowflake.local.workerId": () => registry(plain, "local")?.workerId,
  "snowflake.statefulSet": () => plain.snowflake?.pod !== undefined,
  "snowflake.statefulSetOffset": () => pod.snowflake?.pod?.offset,
  "snowflake.zk.mode": () => registry(zk, "zk")?.mode,
  "snowflake.zk.sessionTimeoutMs": () => registry(zk, "zk")?.sessionTimeoutMs,
  "snowflake.zk.stopWithoutSession": () => registry(zk, "zk")?.stopWithoutSession,
  "snowflake.mysql.mode": () => registry(mysql, "mysql")?.mode,
  "snowflake.mysql.createTable": () => registry(mysql, "mysql")?.createTable,
  "snowflake.postgres.createTable": () => registry(postgres, "postgres")?.createTable,
  "redisSequence.prefix": () => redis.redisSequence?.prefix,
  "redisSequence.timeZone": () => redis.redisSequence?.timeZone,
};

function store<K extends "embedded" | "mysql" | "postgres" | "redis" | "residue">(
  config: ServerConfig,
  kind: K,
) {
  const settings = config.segment?.backend;
  return settings?.kind === kind ? (settings as Extract<typeof settings, { kind: K }>) : undefined;
}

function registry<K extends "local" | "zk" | "mysql" | "postgres">(config: ServerConfig, kind: K) {
  const settings = config.snowflake?.registry;
  return settings?.kind === kind ? (settings as Extract<typeof settings, { kind: K }>) : undefined;
}

/** The README's table of keys: key -> its cells (`\|` inside a cell is not a separator). */
function readmeRows(): Map<string, string[]> {
  const readme = readFileSync(new URL("../README.md", import.meta.url), "utf8");
  const rows = new Map<string, string[]>();
  for (const line of readme.split("\n")) {
    const key = /^\|\s*`([^`]+)`\s*\|/.exec(line)?.[1];
    if (key === undefined) continue;
    const cells = line
      .trim()
      .slice(1, -1)
      .split(/(?<!\\)\|/)
      .map((cell) => cell.trim().replace(/\\\|/g, "|"));
    rows.set(key, cells);
  }
  return rows;
}

const keys = CONFIG_KEYS as readonly KeyDef[];

describe("configuration defaults", () => {
  it("gives a key that is not set the value its key table entry states", () => {
    const defaulted = keys.filter((def) => def.default !== undefined).map((def) => def.key);
    expect(Object.keys(WHERE).sort()).toEqual([...defaulted].sort());
    for (const def of keys.filter((d) => d.default !== undefined)) {
      const expected = def.key === "dataDir" ? resolve(dir, String(def.default)) : def.default;
      expect(WHERE[def.key]!(), def.key).toEqual(expected);
    }
  });

  it("states a default value in its text, as written in a file", () => {
    for (const def of keys.filter((d) => d.default !== undefined)) {
      expect(def.defaultText.startsWith(showDefault(def.default)), def.key).toBe(true);
    }
  });

  it("shows each key's default text in the README's table", () => {
    const rows = readmeRows();
    for (const def of keys) {
      expect(rows.get(def.key)?.[4], def.key).toBe(def.defaultText);
    }
  });
});
