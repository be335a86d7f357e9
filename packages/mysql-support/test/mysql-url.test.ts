import { ErrorCodes } from "@leaf/core";
import { describe, expect, it } from "vitest";
import { parseMysqlUrl, redactMysqlUrl } from "../src/index";

describe("parseMysqlUrl", () => {
  it("reads a JDBC URL in any case, ignoring its parameters", () => {
    expect(parseMysqlUrl("JDBC:MySQL://10.0.0.5/leaf?useUnicode=true&x=a@b")).toEqual({
      hosts: [{ host: "10.0.0.5", port: 3306 }],
      user: undefined,
      password: undefined,
      database: "leaf",
    });
  });

  it("takes a password holding an unencoded @ up to the last @ before the hosts", () => {
    expect(parseMysqlUrl("mariadb://leaf:p@ss@db1:3307,[::1]/ids")).toEqual({
      hosts: [
        { host: "db1", port: 3307 },
        { host: "::1", port: 3306 },
      ],
      user: "leaf",
      password: "p@ss",
      database: "ids",
    });
  });

  it("names the caller's component and key in INVALID_CONFIG, never echoing the password", () => {
    for (const url of [
      "mysql://u:s3cret@h:0/db",
      "mysql://u:s3%zzcret@h/db",
      "http://u:s3cret@h/db",
    ]) {
      expect(() => parseMysqlUrl(url, { component: "registry-mysql", key: "connection" })).toThrow(
        expect.objectContaining({
          code: ErrorCodes.INVALID_CONFIG,
          message: expect.stringMatching(
            /^\[leaf\] \[registry-mysql\] invalid connection: .*\*\*\*@/,
          ),
          details: expect.objectContaining({ key: "connection" }),
        }),
      );
      expect(() => parseMysqlUrl(url)).not.toThrow(/s3cret|s3%zzcret/);
    }
  });

  it("hides the whole password, even one holding @, when redacting", () => {
    expect(redactMysqlUrl("mysql://u:p@ss@h:3306/db")).toBe("mysql://u:***@h:3306/db");
    expect(redactMysqlUrl("mysql://h:3306/db?a=b@c")).toBe("mysql://h:3306/db?a=b@c");
    expect(redactMysqlUrl(42)).toBe(42);
  });
});
