import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { isLeafError, layouts } from "@leaf/core";
import { describe, expect, it } from "vitest";
import { CONFIG_KEYS, loadConfig, parseProperties } from "../src/index";

const dir = mkdtempSync(join(tmpdir(), "leaf-config-test-"));

function file(name: string, text: string): string {
  const path = join(dir, name);
  writeFileSync(path, text);
  return path;
}

/** The INVALID_CONFIG error loadConfig throws, or a failure when it throws nothing. */
function configError(options: Parameters<typeof loadConfig>[0]) {
  try {
    loadConfig(options);
  } catch (error) {
    if (isLeafError(error, "INVALID_CONFIG")) return error;
    throw error;
  }
  throw new Error("expected loadConfig to throw INVALID_CONFIG");
}

describe("configuration", () => {
  it("starts from an embedded default: segment on the embedded store, snowflake on the local registry, 127.0.0.1:8080", () => {
    const config = loadConfig({ env: {}, cwd: dir });
    expect(config.server).toMatchObject({ host: "127.0.0.1", port: 8080, maxBatch: 10_000 });
    expect(config.segment).toMatchObject({
      store: "embedded",
      backend: { dir: join(dir, ".leaf-data", "segments"), demoTag: "leaf-segment-test" },
    });
    expect(config.snowflake?.registry).toEqual({
      kind: "local",
      workerId: 0,
      workIdMap: undefined,
      dir: join(dir, ".leaf-data", "registry-local"),
    });
    expect(config.snowflake?.layout).toBe(layouts.leaf);
    expect(config.redisSequence).toBeUndefined();
    expect(config.server.adminToken).toBeUndefined();
  });

  it("reads Java Leaf's leaf.properties, JDBC url included", () => {
    const path = file(
      "leaf.properties",
      [
        "# Java Leaf's example file",
        "leaf.name=com.sankuai.leaf.opensource.test",
        "leaf.segment.enable=true",
        "leaf.jdbc.url=jdbc:mysql://db.example:3306/leaf?useUnicode=true&characterEncoding=utf8&characterSetResults=utf8",
        "leaf.jdbc.username=leaf",
        "leaf.jdbc.password=s3cret",
        "",
        "leaf.snowflake.enable=true",
        "leaf.snowflake.zk.address=zk1:2181,zk2:2181",
        "leaf.snowflake.port=2181",
      ].join("\n"),
    );
    const config = loadConfig({ file: path, env: {} });
    expect(config.name).toBe("com.sankuai.leaf.opensource.test");
    expect(config.segment?.store).toBe("mysql");
    expect(config.segment?.backend).toMatchObject({
      url: "jdbc:mysql://db.example:3306/leaf?useUnicode=true&characterEncoding=utf8&characterSetResults=utf8",
      user: "leaf",
      password: "s3cret",
    });
    expect(config.snowflake?.registry).toEqual({
      kind: "zk",
      address: "zk1:2181,zk2:2181",
      mode: "normal",
      sessionTimeoutMs: 6000,
      stopWithoutSession: false,
    });
    expect(config.snowflake?.port).toBe(2181);
  });

  it("reads the fork's leaf.snowflake.mode and workIdMap", () => {
    const recycle = loadConfig({
      file: file(
        "recycle.properties",
        "leaf.segment.enable=false\nleaf.snowflake.mode=zk_recycle\nleaf.snowflake.zk.address=127.0.0.1:2181\n",
      ),
      env: {},
    });
    expect(recycle.snowflake?.registry).toMatchObject({ kind: "zk", mode: "recycle" });
    const local = loadConfig({
      file: file(
        "local.properties",
        'leaf.segment.enable=false\nleaf.snowflake.mode=local\nleaf.snowflake.local.workIdMap={"10.1.46.33:8080":1,"10.1.46.33:8081":2}\n',
      ),
      env: {},
    });
    expect(local.snowflake?.registry).toMatchObject({
      kind: "local",
      workerId: undefined,
      workIdMap: { "10.1.46.33:8080": 1, "10.1.46.33:8081": 2 },
    });
    const mysql = loadConfig({
      file: file(
        "mysql.properties",
        "leaf.snowflake.mode=mysql\nleaf.jdbc.url=jdbc:mysql://db:3306/leaf\nleaf.jdbc.username=root\nleaf.jdbc.password=\n",
      ),
      env: {},
    });
    // The fork's mysql mode uses the same database as segment mode.
    expect(mysql.snowflake?.registry).toMatchObject({
      kind: "mysql",
      mode: "fixed",
      url: "jdbc:mysql://db:3306/leaf",
      user: "root",
      password: "",
    });
  });

  it("reads JSON and YAML files with nested or dotted keys", () => {
    const json = loadConfig({
      file: file(
        "leaf.json",
        JSON.stringify({ server: { port: 9000, maxBatch: 500 }, "snowflake.layout": "sonyflake" }),
      ),
      env: {},
    });
    expect(json.server.port).toBe(9000);
    expect(json.server.maxBatch).toBe(500);
    expect(json.snowflake?.layout).toBe(layouts.sonyflake);
    const yaml = loadConfig({
      file: file(
        "leaf.yaml",
        [
          "name: orders",
          "segment:",
          "  enabled: false",
          "snowflake:",
          "  epoch: 1577836800000",
          "server:",
          "  accessTokens:",
          "    order: token-for-orders",
          '    "*": [token-one-123, token-two-456]',
        ].join("\n"),
      ),
      env: {},
    });
    expect(yaml.name).toBe("orders");
    expect(yaml.segment).toBeUndefined();
    expect(yaml.snowflake?.layout.epoch).toBe(1577836800000);
    expect(yaml.snowflake?.layout.workerBits).toBe(10);
    expect(yaml.server.accessTokens).toEqual(
      new Map([
        ["order", ["token-for-orders"]],
        ["*", ["token-one-123", "token-two-456"]],
      ]),
    );
  });

  it("lets the environment override the file, by canonical name or Java Leaf name", () => {
    const path = file(
      "env.properties",
      "server.port=9000\nleaf.snowflake.enable=false\nleaf.jdbc.url=jdbc:mysql://a:3306/leaf\nleaf.jdbc.username=u\nleaf.jdbc.password=p\n",
    );
    const config = loadConfig({
      file: path,
      env: {
        LEAF_SERVER_PORT: "9100",
        LEAF_JDBC_URL: "mysql://b:3307/other",
        LEAF_SEGMENT_MYSQL_PASSWORD: "",
      },
    });
    expect(config.server.port).toBe(9100);
    expect(config.segment?.backend).toMatchObject({
      url: "mysql://b:3307/other",
      user: "u",
      password: "",
    });
    expect(config.sources).toEqual([path, "environment"]);
  });

  it("refuses an unknown snowflake mode, naming the key", () => {
    const error = configError({
      file: file("mode.properties", "leaf.snowflake.mode=zookeeper\n"),
      env: {},
    });
    expect(error.message).toContain("leaf.snowflake.mode");
    expect(error.message).toContain('"zookeeper"');
    expect(error.message).toContain("zk_recycle");
    expect(error.details.key).toBe("leaf.snowflake.mode");
  });

  it("refuses a malformed database URL, naming the key", () => {
    const error = configError({
      file: file(
        "url.properties",
        "leaf.jdbc.url=jdbc:postgresql://db/leaf\nleaf.jdbc.username=u\nleaf.jdbc.password=p\n",
      ),
      env: {},
    });
    expect(error.message).toMatch(/invalid leaf\.jdbc\.url \(.*url\.properties line 1\)/);
    expect(error.message).toContain("jdbc:mysql://");
  });

  it("refuses a port out of range, naming the environment variable", () => {
    const error = configError({ env: { LEAF_SERVER_PORT: "70000" } });
    expect(error.message).toContain("LEAF_SERVER_PORT (environment)");
    expect(error.message).toContain("an integer from 0 to 65,535");
  });

  it("refuses a configured database without a password, naming every name of the key", () => {
    const error = configError({
      file: file(
        "nopw.properties",
        "leaf.jdbc.url=jdbc:mysql://db:3306/leaf\nleaf.jdbc.username=leaf\n",
      ),
      env: {},
    });
    expect(error.message).toContain(
      "missing segment.mysql.password / leaf.jdbc.password / LEAF_SEGMENT_MYSQL_PASSWORD",
    );
    const registry = configError({
      values: { snowflake: { registry: "mysql", mysql: { url: "mysql://root@db:3306/leaf" } } },
      env: {},
    });
    expect(registry.message).toContain("missing snowflake.mysql.password");
  });

  it("refuses a leaf.name with '-' in ZooKeeper normal mode, Java Leaf's tree, with the reason", () => {
    const zk = (name: string, extra = "") =>
      file(
        "zk-name.properties",
        `leaf.name=${name}\nleaf.segment.enable=false\nleaf.snowflake.zk.address=zk:2181\nleaf.snowflake.port=8080\n${extra}`,
      );
    const error = configError({ file: zk("com.example.order-service"), env: {} });
    expect(error.message).toContain("invalid leaf.name (");
    expect(error.message).toContain('"com.example.order-service"');
    expect(error.message).toContain("NumberFormatException");
    expect(error.message).toContain('"com.example.order.service"');
    // Recycle mode's tree is never Java Leaf's, and a name without '-' is Java's own kind.
    const recycle = loadConfig({
      file: zk("com.example.order-service", "leaf.snowflake.mode=zk_recycle\n"),
      env: {},
    });
    expect(recycle.snowflake?.registry).toMatchObject({ kind: "zk", mode: "recycle" });
    expect(loadConfig({ file: zk("com.example.order_service"), env: {} }).name).toBe(
      "com.example.order_service",
    );
  });

  it("refuses a workIdMap that gives one worker id to two nodes, naming the key", () => {
    const error = configError({
      file: file(
        "map.properties",
        'leaf.snowflake.local.workIdMap={"10.0.0.1:8080":1,"10.0.0.2:8080":1}\n',
      ),
      env: {},
    });
    expect(error.message).toContain("invalid leaf.snowflake.local.workIdMap");
    expect(error.message).toContain("worker id 1 is also given to 10.0.0.1:8080");
  });

  it("refuses a zk registry without an address and a redis sequence without a URL", () => {
    expect(configError({ values: { snowflake: { registry: "zk" } }, env: {} }).message).toContain(
      "missing snowflake.zk.address",
    );
    expect(
      configError({ values: { redisSequence: { enabled: true } }, env: {} }).message,
    ).toContain("missing redisSequence.url");
  });

  it("reports every problem at once, passwords hidden", () => {
    const error = configError({
      env: {
        LEAF_SERVER_PORT: "-1",
        LEAF_SERVER_ADMIN_TOKEN: "short",
        LEAF_SERVER_MAX_BATCH: "many",
      },
    });
    expect(error.message).toContain("3 configuration problems");
    expect(error.message).toContain("LEAF_SERVER_PORT");
    expect(error.message).toContain("LEAF_SERVER_MAX_BATCH");
    expect(error.message).toContain("LEAF_SERVER_ADMIN_TOKEN (environment): (hidden)");
    expect(error.message).not.toContain("short");
  });

  it("refuses an unknown key in a file and suggests the one meant", () => {
    const error = configError({
      file: file("typo.json", JSON.stringify({ server: { prot: 8080 } })),
      env: {},
    });
    expect(error.message).toContain("unknown configuration key server.prot");
    expect(error.message).toContain("did you mean server.port?");
  });

  it("ignores keys of other programs in a .properties file, with a warning", () => {
    const config = loadConfig({
      file: file("spring.properties", "spring.application.name=leaf\nserver.port=8081\n"),
      env: {},
    });
    expect(config.server.port).toBe(8081);
    expect(config.warnings).toEqual([
      expect.stringContaining("ignored key spring.application.name"),
    ]);
  });

  it("refuses the same key set twice with different values in one file", () => {
    const error = configError({
      file: file(
        "twice.properties",
        "leaf.jdbc.url=mysql://a:1/x\nsegment.mysql.url=mysql://b:1/x\nleaf.jdbc.username=u\nleaf.jdbc.password=p\n",
      ),
      env: {},
    });
    expect(error.message).toContain("set the same key segment.mysql.url to different values");
  });

  it("refuses a layout that does not fit 63 bits, naming the key", () => {
    const error = configError({ values: { snowflake: { timestampBits: 50 } }, env: {} });
    expect(error.message).toContain("invalid snowflake layout");
    expect(error.message).toContain("63 bits");
  });

  it("refuses to start with every mode disabled", () => {
    const error = configError({
      values: { segment: { enabled: false }, snowflake: { enabled: false } },
      env: {},
    });
    expect(error.message).toContain("nothing to serve");
  });

  it("names a file it cannot read, or cannot parse", () => {
    expect(configError({ file: join(dir, "missing.yaml"), env: {} }).message).toContain(
      "cannot read the configuration file",
    );
    expect(configError({ file: file("bad.json", "{ nope"), env: {} }).message).toContain(
      "is not valid JSON",
    );
    expect(configError({ file: file("leaf.toml", "a = 1"), env: {} }).message).toContain(
      "unsupported configuration file",
    );
  });

  it("documents every key, its environment variable and its Java Leaf names in the README", () => {
    const readme = readFileSync(new URL("../README.md", import.meta.url), "utf8");
    for (const def of CONFIG_KEYS) {
      expect(readme, def.key).toContain(`\`${def.key}\``);
      expect(readme, def.env).toContain(`\`${def.env}\``);
      for (const alias of def.aliases) expect(readme, alias).toContain(`\`${alias}\``);
    }
  });
});

describe("the .properties reader", () => {
  it("reads separators, comments, continuations and escapes as java.util.Properties does", () => {
    const entries = parseProperties(
      [
        "# comment",
        "! also a comment",
        "a=1",
        "b : 2",
        "c 3",
        "  d=four \\",
        "     more",
        "e=tab\\there\\u0041",
        "f\\=g=h",
        "empty=",
      ].join("\r\n"),
    );
    expect(entries.map(({ key, value }) => [key, value])).toEqual([
      ["a", "1"],
      ["b", "2"],
      ["c", "3"],
      ["d", "four more"],
      ["e", "tab\there\u0041"],
      ["f=g", "h"],
      ["empty", ""],
    ]);
    expect(entries[3]!.line).toBe(6);
  });
});

describe("safe defaults for a real deployment", () => {
  it("listens on every interface when a shared store or registry is named, as Java Leaf does; the demo stays on loopback", () => {
    const java = loadConfig({
      file: file(
        "deploy.properties",
        "leaf.name=orders\nleaf.segment.enable=true\nleaf.jdbc.url=jdbc:mysql://db:3306/leaf\n" +
          "leaf.jdbc.username=leaf\nleaf.jdbc.password=x\nleaf.snowflake.enable=true\n" +
          "leaf.snowflake.zk.address=zk:2181\nleaf.snowflake.port=8080\n",
      ),
      env: {},
    });
    expect(java.server.host).toBe("0.0.0.0");
    expect(java.server.hostReason).toContain("leaf.jdbc.url, leaf.snowflake.zk.address");
    const demo = loadConfig({ env: {} });
    expect(demo.server.host).toBe("127.0.0.1");
    expect(demo.server.hostReason).toContain("loopback only");
    const pinned = loadConfig({
      env: {
        LEAF_SERVER_HOST: "127.0.0.1",
        LEAF_JDBC_URL: "mysql://u@db/leaf",
        LEAF_JDBC_PASSWORD: "",
      },
      values: { snowflake: { enabled: false } },
    });
    expect(pinned.server.host).toBe("127.0.0.1");
    expect(pinned.server.hostReason).toContain("LEAF_SERVER_HOST");
  });

  it("does not start snowflake mode with worker id 0 from a Java Leaf file that has only segment keys", () => {
    const error = configError({
      file: file(
        "segment-only.properties",
        "leaf.name=orders\nleaf.segment.enable=true\nleaf.jdbc.url=jdbc:mysql://db:3306/leaf\n" +
          "leaf.jdbc.username=leaf\nleaf.jdbc.password=x\n",
      ),
      env: {},
    });
    expect(error.message).toContain("leaf.snowflake.enable defaults to true in Java Leaf");
    expect(error.message).toContain("no leaf.snowflake.zk.address is set");
    expect(error.message).toContain("leaf.snowflake.enable=false");
  });

  it("takes the worker id from a StatefulSet pod's name, with its offset, and refuses a name without an ordinal", () => {
    const pod = loadConfig({
      env: {
        HOSTNAME: "leaf-4",
        LEAF_SNOWFLAKE_STATEFUL_SET: "true",
        LEAF_SNOWFLAKE_STATEFUL_SET_OFFSET: "100",
        LEAF_SERVER_HOST: "0.0.0.0",
        LEAF_SEGMENT_ENABLED: "false",
      },
      cwd: dir,
    });
    expect(pod.snowflake?.registry).toMatchObject({ kind: "local", workerId: 104 });
    expect(pod.snowflake?.pod).toEqual({
      hostname: "leaf-4",
      offset: 100,
      ordinal: 4,
      workerIds: [104],
    });
    const deployment = configError({
      env: { HOSTNAME: "leaf-7f9c8d5b-x2x9z", LEAF_SNOWFLAKE_STATEFUL_SET: "true" },
      cwd: dir,
    });
    expect(deployment.message).toContain("LEAF_SNOWFLAKE_STATEFUL_SET (environment)");
    expect(deployment.message).toContain('"leaf-7f9c8d5b-x2x9z"');
    const both = configError({
      env: {
        HOSTNAME: "leaf-1",
        LEAF_SNOWFLAKE_STATEFUL_SET: "true",
        LEAF_SNOWFLAKE_LOCAL_WORKER_ID: "3",
      },
      cwd: dir,
    });
    expect(both.message).toContain("takes the worker id from the pod's name");
  });

  it("refuses the local registry's default worker id off loopback unless the id is set", () => {
    const error = configError({
      env: { LEAF_SERVER_HOST: "0.0.0.0", LEAF_SEGMENT_STORE: "embedded" },
    });
    expect(error.message).toContain(
      "local registry's default worker id 0 while listening on 0.0.0.0",
    );
    expect(error.message).toContain("snowflake.local.workerId");
    const explicit = loadConfig({
      env: {
        LEAF_SERVER_HOST: "0.0.0.0",
        LEAF_SEGMENT_STORE: "embedded",
        LEAF_SNOWFLAKE_LOCAL_WORKER_ID: "0",
      },
    });
    expect(explicit.snowflake?.registry).toMatchObject({ kind: "local", workerId: 0 });
  });

  it("refuses the local registry's default worker id on loopback too once a shared store or registry is configured", () => {
    for (const [name, value] of [
      ["LEAF_SEGMENT_MYSQL_URL", "mysql://127.0.0.1:3306/leaf"],
      ["LEAF_REDIS_SEQUENCE_URL", "redis://127.0.0.1:6379"],
    ] as const) {
      const error = configError({
        env: {
          LEAF_SERVER_HOST: "127.0.0.1",
          [name]: value,
          LEAF_SEGMENT_MYSQL_USERNAME: "leaf",
          LEAF_SEGMENT_MYSQL_PASSWORD: "",
        },
      });
      expect(error.message).toContain("local registry's default worker id 0");
      expect(error.message).toContain(`${name} (environment)`);
      expect(error.message).toContain("LEAF_SNOWFLAKE_LOCAL_WORKER_ID");
      expect(error.details.key).toBe("snowflake.local.workerId");
    }
    const explicit = loadConfig({
      env: {
        LEAF_SERVER_HOST: "127.0.0.1",
        LEAF_SEGMENT_MYSQL_URL: "mysql://127.0.0.1:3306/leaf",
        LEAF_SEGMENT_MYSQL_USERNAME: "leaf",
        LEAF_SEGMENT_MYSQL_PASSWORD: "",
        LEAF_SNOWFLAKE_LOCAL_WORKER_ID: "0",
      },
    });
    expect(explicit.snowflake?.registry).toMatchObject({ kind: "local", workerId: 0 });
  });

  it("asks a shared registry for a StatefulSet pod's ordinal, and refuses a registry that cannot grant it", () => {
    const pod = loadConfig({
      env: {
        HOSTNAME: "leaf-3",
        LEAF_SNOWFLAKE_STATEFUL_SET: "true",
        LEAF_SNOWFLAKE_REGISTRY: "redis",
        LEAF_SNOWFLAKE_REDIS_URL: "redis://127.0.0.1:6379",
        LEAF_SEGMENT_ENABLED: "false",
      },
      cwd: dir,
    });
    expect(pod.snowflake?.registry.kind).toBe("redis");
    expect(pod.snowflake?.pod).toEqual({
      hostname: "leaf-3",
      offset: 0,
      ordinal: 3,
      workerIds: [3],
    });
    const zk = configError({
      env: {
        HOSTNAME: "leaf-3",
        LEAF_SNOWFLAKE_STATEFUL_SET: "true",
        LEAF_SNOWFLAKE_ZK_ADDRESS: "127.0.0.1:2181",
        LEAF_SEGMENT_ENABLED: "false",
      },
      cwd: dir,
    });
    expect(zk.message).toContain(
      "LEAF_SNOWFLAKE_STATEFUL_SET (environment) asks the zk registry in normal mode",
    );
    expect(zk.message).toContain("zk with snowflake.zk.mode=recycle");
    const recycle = loadConfig({
      env: {
        HOSTNAME: "leaf-3",
        LEAF_SNOWFLAKE_STATEFUL_SET: "true",
        LEAF_SNOWFLAKE_REGISTRY: "zk_recycle",
        LEAF_SNOWFLAKE_ZK_ADDRESS: "127.0.0.1:2181",
        LEAF_SEGMENT_ENABLED: "false",
      },
      cwd: dir,
    });
    expect(recycle.snowflake?.pod?.workerIds).toEqual([3]);
  });

  it("never ignores a named registry address: it chooses that registry, and two of them or another beside snowflake.registry are refused", () => {
    const pod = {
      HOSTNAME: "leaf-3",
      LEAF_SNOWFLAKE_STATEFUL_SET: "true",
      LEAF_SEGMENT_ENABLED: "false",
    };
    for (const [name, value, kind] of [
      ["LEAF_SNOWFLAKE_REDIS_URL", "redis://127.0.0.1:6379", "redis"],
      ["LEAF_SNOWFLAKE_ETCD_URL", "http://127.0.0.1:2379", "etcd"],
    ] as const) {
      const chosen = loadConfig({ env: { ...pod, [name]: value }, cwd: dir });
      expect(chosen.snowflake?.registry.kind).toBe(kind);
      expect(chosen.snowflake?.pod?.workerIds).toEqual([3]);
      const local = configError({
        env: { ...pod, [name]: value, LEAF_SNOWFLAKE_REGISTRY: "local" },
        cwd: dir,
      });
      expect(local.message).toContain(
        `LEAF_SNOWFLAKE_REGISTRY (environment) chooses the local registry, but ${name} (environment) names another registry`,
      );
      expect(local.details.key).toBe(
        name === "LEAF_SNOWFLAKE_REDIS_URL" ? "snowflake.redis.url" : "snowflake.etcd.url",
      );
    }
    const two = configError({
      env: {
        ...pod,
        LEAF_SNOWFLAKE_REDIS_URL: "redis://127.0.0.1:6379",
        LEAF_SNOWFLAKE_ETCD_URL: "http://127.0.0.1:2379",
      },
      cwd: dir,
    });
    expect(two.message).toContain(
      "LEAF_SNOWFLAKE_REDIS_URL (environment), LEAF_SNOWFLAKE_ETCD_URL (environment) name 2 registries",
    );
    // The MySQL registry's own URL chooses it, in fixed mode: a StatefulSet then needs lease mode.
    const fixed = configError({
      env: {
        ...pod,
        LEAF_SNOWFLAKE_MYSQL_URL: "mysql://127.0.0.1:3306/leaf",
        LEAF_SNOWFLAKE_MYSQL_USERNAME: "leaf",
        LEAF_SNOWFLAKE_MYSQL_PASSWORD: "",
      },
      cwd: dir,
    });
    expect(fixed.message).toContain("asks the mysql registry in fixed mode");
  });

  it("refuses the volume-only StatefulSet mode beside a shared store unless snowflake.registry=local is stated", () => {
    const pod = { HOSTNAME: "leaf-3", LEAF_SNOWFLAKE_STATEFUL_SET: "true" };
    for (const shared of [
      { LEAF_REDIS_SEQUENCE_URL: "redis://127.0.0.1:6379", LEAF_SEGMENT_ENABLED: "false" },
      {
        LEAF_SEGMENT_MYSQL_URL: "mysql://127.0.0.1:3306/leaf",
        LEAF_SEGMENT_MYSQL_USERNAME: "leaf",
        LEAF_SEGMENT_MYSQL_PASSWORD: "",
      },
    ]) {
      const error = configError({ env: { ...pod, ...shared }, cwd: dir });
      expect(error.details.key).toBe("snowflake.statefulSet");
      expect(error.message).toContain("guarded only by the pod's volume");
      expect(error.message).toContain(`${Object.keys(shared)[0]} (environment)`);
      expect(error.message).toContain(
        "state snowflake.registry=local to accept the volume-only guard",
      );
      const stated = loadConfig({
        env: { ...pod, ...shared, LEAF_SNOWFLAKE_REGISTRY: "local" },
        cwd: dir,
      });
      expect(stated.snowflake?.registry).toMatchObject({ kind: "local", workerId: 3 });
    }
  });

  it("refuses a StatefulSet offset past the layout's largest worker id, an offset without snowflake.statefulSet, and backups with a pod's ordinal", () => {
    const past = configError({
      env: {
        HOSTNAME: "leaf-3",
        LEAF_SNOWFLAKE_STATEFUL_SET: "true",
        LEAF_SNOWFLAKE_STATEFUL_SET_OFFSET: "1021",
        LEAF_SNOWFLAKE_REGISTRY: "redis",
        LEAF_SNOWFLAKE_REDIS_URL: "redis://127.0.0.1:6379",
        LEAF_SEGMENT_ENABLED: "false",
      },
      cwd: dir,
    });
    expect(past.details.key).toBe("snowflake.statefulSetOffset");
    expect(past.message).toContain(
      "the pod's worker id 1024 (HOSTNAME \"leaf-3\", ordinal 3, plus LEAF_SNOWFLAKE_STATEFUL_SET_OFFSET (environment) 1021) is above the layout's largest worker id 1023",
    );
    const alone = configError({
      env: {
        LEAF_SNOWFLAKE_STATEFUL_SET_OFFSET: "5",
        LEAF_SNOWFLAKE_REGISTRY: "redis",
        LEAF_SNOWFLAKE_REDIS_URL: "redis://127.0.0.1:6379",
        LEAF_SEGMENT_ENABLED: "false",
      },
      cwd: dir,
    });
    expect(alone.details.key).toBe("snowflake.statefulSetOffset");
    const backups = configError({
      env: {
        HOSTNAME: "leaf-3",
        LEAF_SNOWFLAKE_STATEFUL_SET: "true",
        LEAF_SNOWFLAKE_BACKUPS: "2",
        LEAF_SNOWFLAKE_REGISTRY: "redis",
        LEAF_SNOWFLAKE_REDIS_URL: "redis://127.0.0.1:6379",
        LEAF_SEGMENT_ENABLED: "false",
      },
      cwd: dir,
    });
    expect(backups.details.key).toBe("snowflake.backups");
    expect(backups.message).toContain("leases exactly its ordinal, without backup worker ids");
    expect(alone.message).toContain("LEAF_SNOWFLAKE_STATEFUL_SET_OFFSET (environment) is set but");
  });

  it("uses the embedded store with a Java Leaf file or off loopback only when asked to", () => {
    const java = configError({
      file: file(
        "no-jdbc.properties",
        "leaf.name=orders\nleaf.segment.enable=true\nleaf.snowflake.enable=false\n",
      ),
      env: {},
    });
    expect(java.message).toContain("segment mode is on (leaf.segment.enable");
    expect(java.message).toContain("no leaf.jdbc.url is set");
    expect(java.message).toContain("segment.store=embedded for one single node");
    const open = configError({
      env: { LEAF_SERVER_HOST: "0.0.0.0", LEAF_SNOWFLAKE_ENABLED: "false" },
    });
    expect(open.message).toContain("embedded store while listening on 0.0.0.0");
    const asked = loadConfig({
      file: file(
        "embedded.properties",
        "leaf.name=orders\nleaf.segment.enable=true\nsegment.store=embedded\nleaf.snowflake.enable=false\n",
      ),
      env: {},
    });
    expect(asked.segment?.store).toBe("embedded");
  });
});
