import { ErrorCodes } from "@leaf/core";
import { describe, expect, it } from "vitest";
import { classifyMysqlError, mysqlError } from "../src/index";

// Errors shaped as mysql2 raises them (errno, code, sqlState, message as MariaDB 10.11 sends them).
const server = (errno: number, code: string, sqlState: string, message: string) =>
  Object.assign(new Error(message), { errno, code, sqlState, fatal: false });
const fixes = {
  credentials: "the user and password",
  database: "the database",
  createTable: "createSchema()",
  server: "the url",
};
const context = {
  component: "test",
  doing: "taking a range",
  host: "db:3306",
  table: "leaf.leaf_alloc",
  fixes,
};

describe("classifyMysqlError", () => {
  it("sorts MySQL's answers into unreachable, access, schema, read-only and statement", () => {
    const kinds = [
      [server(1045, "ER_ACCESS_DENIED_ERROR", "28000", "Access denied for user 'u'@'h'"), "access"],
      [
        server(1044, "ER_DBACCESS_DENIED_ERROR", "42000", "Access denied to database 'x'"),
        "access",
      ],
      [server(1142, "ER_TABLEACCESS_DENIED_ERROR", "42000", "UPDATE command denied"), "access"],
      [server(1227, "ER_SPECIFIC_ACCESS_DENIED_ERROR", "42000", "need SUPER"), "access"],
      [server(1049, "ER_BAD_DB_ERROR", "42000", "Unknown database 'x'"), "schema"],
      [server(1146, "ER_NO_SUCH_TABLE", "42S02", "Table 'x.y' doesn't exist"), "schema"],
      [server(1054, "ER_BAD_FIELD_ERROR", "42S22", "Unknown column 'c'"), "schema"],
      [server(1290, "ER_OPTION_PREVENTS_STATEMENT", "HY000", "--read-only"), "read-only"],
      [server(1836, "ER_READ_ONLY_MODE", "HY000", "read-only mode"), "read-only"],
      [
        Object.assign(new Error("connect ECONNREFUSED"), { code: "ECONNREFUSED", errno: -111 }),
        "unreachable",
      ],
      [
        Object.assign(new Error("closed"), { code: "PROTOCOL_CONNECTION_LOST", fatal: true }),
        "unreachable",
      ],
      [
        server(1317, "ER_QUERY_INTERRUPTED", "70100", "Query execution was interrupted"),
        "interrupted",
      ],
      [server(1927, "ER_CONNECTION_KILLED", "70100", "Connection was killed"), "interrupted"],
      [
        server(
          1969,
          "ER_STATEMENT_TIMEOUT",
          "70100",
          "Query execution was interrupted (max_statement_time exceeded)",
        ),
        "interrupted",
      ],
      [
        server(3024, "ER_QUERY_TIMEOUT", "HY000", "maximum statement execution time exceeded"),
        "interrupted",
      ],
      [server(1062, "ER_DUP_ENTRY", "23000", "Duplicate entry"), "statement"],
      [server(1213, "ER_LOCK_DEADLOCK", "40001", "Deadlock"), "statement"],
    ] as const;
    for (const [error, kind] of kinds)
      expect(classifyMysqlError(error).kind, error.message).toBe(kind);
    expect(classifyMysqlError(server(1213, "ER_LOCK_DEADLOCK", "40001", "x")).transient).toBe(true);
    expect(classifyMysqlError(server(1062, "ER_DUP_ENTRY", "23000", "x")).transient).toBe(false);
    // An error that is not the server's answer (a bug, a plain Error) is not "the server is down".
    expect(classifyMysqlError(new TypeError("x is undefined"))).toMatchObject({
      kind: "statement",
      transient: true,
    });
  });
});

describe("mysqlError", () => {
  it("reads a statement the server interrupted (KILL QUERY, a time limit) as UNAVAILABLE, not a bad argument", () => {
    const killed = mysqlError(
      server(1317, "ER_QUERY_INTERRUPTED", "70100", "Query execution was interrupted"),
      context,
    );
    expect(killed.code).toBe(ErrorCodes.UNAVAILABLE);
    expect(killed.details).toMatchObject({ mysql: "interrupted", errno: 1317 });
    expect(killed.message).toMatch(/interrupted the statement.* while taking a range; try again/);
  });

  it("gives each class the operator's fix and a stable code", () => {
    const denied = mysqlError(
      server(
        1045,
        "ER_ACCESS_DENIED_ERROR",
        "28000",
        "Access denied for user 'u'@'h' (using password: YES)",
      ),
      context,
    );
    expect(denied.code).toBe(ErrorCodes.INVALID_CONFIG);
    expect(denied.message).toMatch(
      /access denied on db:3306: .*user 'u'@'h'.* while taking a range; check the user and password$/,
    );
    expect(denied.message).not.toMatch(/unavailable|unreachable/i);
    expect(denied.details).toMatchObject({
      mysql: "access",
      errno: 1045,
      fix: "check the user and password",
    });

    const update = mysqlError(
      server(
        1142,
        "ER_TABLEACCESS_DENIED_ERROR",
        "42000",
        "UPDATE command denied to user 'ro'@'h' for table `leaf`.`leaf_alloc`",
      ),
      context,
    );
    expect(update.code).toBe(ErrorCodes.INVALID_CONFIG);
    expect(update.message).toContain("the user may not UPDATE on table leaf.leaf_alloc");
    expect(update.message).toContain("GRANT UPDATE ON leaf.leaf_alloc");

    const table = mysqlError(
      server(1146, "ER_NO_SUCH_TABLE", "42S02", "Table 'leaf.leaf_alloc' doesn't exist"),
      context,
    );
    expect(table.code).toBe(ErrorCodes.INVALID_CONFIG);
    expect(table.message).toMatch(/missing table .*; create the table with createSchema\(\)$/);

    const database = mysqlError(
      server(1049, "ER_BAD_DB_ERROR", "42000", "Unknown database 'nope'"),
      context,
    );
    expect(database.message).toMatch(/unknown database .*'nope'.*; check the database/);

    const readOnly = mysqlError(
      server(
        1290,
        "ER_OPTION_PREVENTS_STATEMENT",
        "HY000",
        "The MariaDB server is running with the --read-only option",
      ),
      context,
    );
    expect(readOnly.code).toBe(ErrorCodes.UNAVAILABLE);
    expect(readOnly.message).toMatch(/read-only .*; point the url at the primary/);

    const down = mysqlError(
      Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:1"), {
        code: "ECONNREFUSED",
        errno: -111,
      }),
      context,
    );
    expect(down.code).toBe(ErrorCodes.UNAVAILABLE);
    expect(down.details).toMatchObject({ mysql: "unreachable", unreachable: true });
    expect(down.message.match(/db:3306/g)).toHaveLength(1);

    const duplicate = mysqlError(server(1062, "ER_DUP_ENTRY", "23000", "Duplicate entry"), context);
    expect(duplicate.code).toBe(ErrorCodes.INVALID_ARGUMENT);
    expect(duplicate.details.mysqlCode).toBe("ER_DUP_ENTRY");
  });
});
