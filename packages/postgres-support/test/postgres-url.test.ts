import { ErrorCodes } from "@leaf/core";
import { describe, expect, it } from "vitest";
import { parsePostgresUrl, redactPostgresUrl } from "../src/index";

describe("parsePostgresUrl", () => {
  it("reads libpq's URLs with several hosts, a password holding @ and an IPv6 host", () => {
    expect(parsePostgresUrl("postgresql://leaf:p@ss@db1,[::1]:5433/ids?sslmode=require")).toEqual({
      hosts: [
        { host: "db1", port: 5432 },
        { host: "::1", port: 5433 },
      ],
      user: "leaf",
      password: "p@ss",
      database: "ids",
    });
  });

  it("reads JDBC's form in any case, ignoring its parameters", () => {
    expect(parsePostgresUrl("JDBC:PostgreSQL://10.0.0.5/leaf?ssl=true&currentSchema=a")).toEqual({
      hosts: [{ host: "10.0.0.5", port: 5432 }],
      user: undefined,
      password: undefined,
      database: "leaf",
    });
  });

  it("names the caller's component and key in INVALID_CONFIG, never echoing the password", () => {
    for (const url of [
      "postgres://u:s3cret@h:0/db",
      "postgres://u:s3cret@h:99999/db",
      "postgres://u:s3%zzcret@h/db",
      "mysql://u:s3cret@h/db",
    ]) {
      expect(() =>
        parsePostgresUrl(url, { component: "registry-postgres", key: "connection" }),
      ).toThrow(
        expect.objectContaining({
          code: ErrorCodes.INVALID_CONFIG,
          message: expect.stringMatching(
            /^\[leaf\] \[registry-postgres\] invalid connection: .*\*\*\*@.*postgres:\/\//,
          ),
          details: expect.objectContaining({ key: "connection" }),
        }),
      );
      expect(() => parsePostgresUrl(url)).not.toThrow(/s3cret|s3%zzcret/);
    }
  });

  it("says what the caller expects when it gives its own words", () => {
    expect(() =>
      parsePostgresUrl("redis://h/0", { expected: "a URL with one host, like postgres://h/db" }),
    ).toThrow(
      /invalid url: "redis:\/\/h\/0"; expected a URL with one host, like postgres:\/\/h\/db$/,
    );
  });

  it("hides the whole password, even one holding @, when redacting", () => {
    expect(redactPostgresUrl("postgres://u:p@ss@h:5432/db")).toBe("postgres://u:***@h:5432/db");
    expect(redactPostgresUrl("postgres://h:5432/db?a=b@c")).toBe("postgres://h:5432/db?a=b@c");
    expect(redactPostgresUrl(42)).toBe(42);
  });
});
