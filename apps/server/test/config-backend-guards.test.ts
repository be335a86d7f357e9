// What an attack on the backend plug-ins found, each refused or hidden now: another store's address
// beside the store in use (ignored, so two servers served the same ids from their own stores), a
// database password shown in a configuration error or changing the public fingerprint, a
// several-host URL for the PostgreSQL registry passing --check, and problems naming the wrong key.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { configSummary } from "../src/config-summary";
import { loadConfig } from "../src/index";

const dir = mkdtempSync(join(tmpdir(), "leaf-config-guards-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const load = (env: Record<string, string>) => loadConfig({ env, cwd: dir });
const problem = (env: Record<string, string>): string => {
  try {
    load(env);
  } catch (error) {
    return (error as Error).message;
  }
  throw new Error("the configuration was accepted");
};

const PG = "postgres://leafuser:S3cretPw@db1:5432/leaf";
const MYSQL = "mysql://leaf:S3cretPw@db1:3306/leaf";

describe("another store's address beside the store in use", () => {
  it("is refused, naming both keys, whichever store is stated", () => {
    const embedded = problem({
      LEAF_SEGMENT_STORE: "embedded",
      LEAF_SEGMENT_POSTGRES_URL: PG,
      LEAF_SNOWFLAKE_ENABLED: "false",
    });
    expect(embedded).toContain("LEAF_SEGMENT_STORE (environment) chooses the embedded store");
    expect(embedded).toContain("LEAF_SEGMENT_POSTGRES_URL (environment) names another store");
    const mysql = problem({
      LEAF_SEGMENT_STORE: "mysql",
      LEAF_SEGMENT_MYSQL_URL: MYSQL,
      LEAF_SEGMENT_REDIS_URL: "redis://127.0.0.1:6379",
      LEAF_SNOWFLAKE_ENABLED: "false",
    });
    expect(mysql).toContain("LEAF_SEGMENT_REDIS_URL (environment) names another store");
  });

  it("is accepted when the registry reads it (its database defaults to the segment store's)", () => {
    const config = load({
      LEAF_SEGMENT_STORE: "embedded",
      LEAF_SEGMENT_POSTGRES_URL: PG,
      LEAF_SNOWFLAKE_REGISTRY: "postgres",
    });
    expect(config.segment?.store).toBe("embedded");
    expect(config.snowflake?.registry).toMatchObject({ kind: "postgres", url: PG });
  });
});

describe("database passwords", () => {
  it("are hidden in configuration errors", () => {
    for (const [name, value] of [
      ["LEAF_SEGMENT_POSTGRES_URL", "postgres://u:S3cretPw@db:99999/leaf"],
      ["LEAF_SNOWFLAKE_POSTGRES_URL", "postgres://u:S3cretPw@db:99999/leaf"],
      ["LEAF_SEGMENT_MYSQL_URL", "mysql://u:S3cretPw@db:99999/leaf"],
      ["LEAF_SNOWFLAKE_MYSQL_URL", "mysql://u:S3cretPw@db:99999/leaf"],
    ] as const) {
      const message = problem({ [name]: value, LEAF_SNOWFLAKE_LOCAL_WORKER_ID: "1" });
      expect(message, name).toContain(`invalid ${name} (environment)`);
      expect(message, name).toContain("u:***@db:99999");
      expect(message, name).not.toContain("S3cretPw");
    }
  });

  it("leave the configuration's fingerprint alone, as the password keys do", () => {
    const fingerprint = (password: string) =>
      configSummary(
        load({
          LEAF_SEGMENT_POSTGRES_URL: `postgres://leafuser:${password}@db1:5432/leaf`,
          LEAF_SNOWFLAKE_ENABLED: "false",
        }),
      ).fingerprint;
    expect(fingerprint("first")).toBe(fingerprint("second"));
    const other = configSummary(
      load({
        LEAF_SEGMENT_POSTGRES_URL: "postgres://leafuser:first@db2:5432/leaf",
        LEAF_SNOWFLAKE_ENABLED: "false",
      }),
    ).fingerprint;
    expect(other).not.toBe(fingerprint("first"));
  });
});

describe("the PostgreSQL registry's database", () => {
  it("is one host: a failover list is refused at --check, naming the key it came from", () => {
    const own = problem({
      LEAF_SEGMENT_ENABLED: "false",
      LEAF_SNOWFLAKE_POSTGRES_URL: "postgres://u:pw@h1:5432,h2:5432/reg",
    });
    expect(own).toContain(
      "invalid LEAF_SNOWFLAKE_POSTGRES_URL (environment) for the PostgreSQL registry: 2 hosts",
    );
    const borrowed = problem({
      LEAF_SEGMENT_POSTGRES_URL: "postgres://u:pw@h1:5432,h2:5432/reg",
      LEAF_SNOWFLAKE_REGISTRY: "postgres",
    });
    expect(borrowed).toContain(
      "invalid LEAF_SEGMENT_POSTGRES_URL (environment) for the PostgreSQL registry",
    );
    expect(borrowed).toContain("give it with snowflake.postgres.url");
  });

  it("names the registry's own keys when its URL lacks a user, and an invalid URL once", () => {
    const noUser = problem({
      LEAF_SEGMENT_ENABLED: "false",
      LEAF_SNOWFLAKE_POSTGRES_URL: "postgres://db:5432/reg",
      LEAF_SNOWFLAKE_POSTGRES_PASSWORD: "",
    });
    expect(noUser).toContain("missing snowflake.postgres.username");
    expect(noUser).not.toContain("segment.postgres.username");
    const invalid = problem({
      LEAF_SEGMENT_ENABLED: "false",
      LEAF_SNOWFLAKE_POSTGRES_URL: "http://db/reg",
    });
    expect(invalid).toContain("invalid LEAF_SNOWFLAKE_POSTGRES_URL (environment)");
    expect(invalid).not.toContain("missing");
  });
});
