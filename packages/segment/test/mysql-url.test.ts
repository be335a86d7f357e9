import { ErrorCodes } from "@leaf/core";
import { describe, expect, it } from "vitest";
import { parseMysqlUrl } from "../src/index";

describe("parseMysqlUrl", () => {
  it("reads Java Leaf's JDBC URL, ignoring its parameters", () => {
    expect(
      parseMysqlUrl("jdbc:mysql://10.0.0.5:3306/leaf?useUnicode=true&characterEncoding=utf8"),
    ).toEqual({
      hosts: [{ host: "10.0.0.5", port: 3306 }],
      user: undefined,
      password: undefined,
      database: "leaf",
    });
  });

  it("reads several hosts in failover order, user and an encoded password", () => {
    expect(parseMysqlUrl("mysql://leaf:p%40ss@primary:3307,standby,[::1]:3308/ids")).toEqual({
      hosts: [
        { host: "primary", port: 3307 },
        { host: "standby", port: 3306 },
        { host: "::1", port: 3308 },
      ],
      user: "leaf",
      password: "p@ss",
      database: "ids",
    });
  });

  it("refuses other URLs with INVALID_CONFIG, without echoing the password", () => {
    for (const url of [
      "postgres://a/b",
      "mysql://",
      "mysql://h:0/db",
      "mysql://h:x/db",
      5 as unknown as string,
    ]) {
      expect(() => parseMysqlUrl(url)).toThrow(
        expect.objectContaining({ code: ErrorCodes.INVALID_CONFIG }),
      );
    }
    expect(() => parseMysqlUrl("mysql://u:secret@h:99999/db")).toThrow(
      /mysql:\/\/u:\*\*\*@h:99999/,
    );
    expect(() => parseMysqlUrl("mysql://u:secret@h:99999/db")).not.toThrow(/secret/);
  });
});
