import { ErrorCodes, LeafError } from "@leaf/core";
import { describe, expect, it } from "vitest";
import { classifyPostgresError, postgresError, sqlStateOf } from "../src/index";

// Errors shaped as pg raises them: a server's answer carries its SQLSTATE as `code` and a
// `severity`; a socket error carries Node's code and no severity.
const server = (code: string, message: string) =>
  Object.assign(new Error(message), { code, severity: "ERROR" });
const socket = (code: string, message: string) => Object.assign(new Error(message), { code });
const fixes = {
  credentials: "the user and password in url",
  database: "the database in url",
  createTable: "createSchema()",
  server: "url",
};
const context = {
  component: "test",
  doing: "taking a range",
  host: "db:5432",
  table: "leaf.leaf_alloc",
  fixes,
};

describe("classifyPostgresError", () => {
  it("sorts PostgreSQL's answers by SQLSTATE into access, schema, read-only, interrupted, unreachable and statement", () => {
    const kinds = [
      [server("28P01", 'password authentication failed for user "u"'), "access"],
      [server("28000", 'role "u" does not exist'), "access"],
      [server("42501", "permission denied for table leaf_alloc"), "access"],
      [server("3D000", 'database "x" does not exist'), "schema"],
      [server("3F000", 'schema "x" does not exist'), "schema"],
      [server("42P01", 'relation "leaf_alloc" does not exist'), "schema"],
      [server("42703", 'column "c" does not exist'), "schema"],
      [server("25006", "cannot execute UPDATE in a read-only transaction"), "read-only"],
      [server("57014", "canceling statement due to statement timeout"), "interrupted"],
      [server("57P01", "terminating connection due to administrator command"), "unreachable"],
      [server("57P03", "the database system is starting up"), "unreachable"],
      [server("53300", "sorry, too many clients already"), "unreachable"],
      [server("08006", "connection failure"), "unreachable"],
      [socket("ECONNREFUSED", "connect ECONNREFUSED 127.0.0.1:1"), "unreachable"],
      [new Error("Connection terminated unexpectedly"), "unreachable"],
      [server("23505", "duplicate key value violates unique constraint"), "statement"],
      [server("40P01", "deadlock detected"), "statement"],
    ] as const;
    for (const [error, kind] of kinds) {
      expect(classifyPostgresError(error).kind, error.message).toBe(kind);
    }
    expect(classifyPostgresError(server("40001", "could not serialize")).transient).toBe(true);
    expect(classifyPostgresError(server("55P03", "could not obtain lock")).transient).toBe(true);
    expect(classifyPostgresError(server("23505", "duplicate key")).transient).toBe(false);
  });

  it("reads a SQLSTATE only from an answer of the server, never from a socket error's code", () => {
    expect(sqlStateOf(server("42P01", "x"))).toBe("42P01");
    expect(sqlStateOf(socket("EPIPE", "x"))).toBeUndefined();
    // Five characters like a SQLSTATE, but no severity: not the server's answer.
    expect(sqlStateOf(socket("ABCDE", "x"))).toBeUndefined();
    expect(classifyPostgresError(undefined)).toMatchObject({
      kind: "unreachable",
      sqlState: undefined,
    });
  });
});

describe("postgresError", () => {
  it("tells the operator what to change, in the caller's words, with problem and fix in details", () => {
    const missing = postgresError(server("42P01", 'relation "leaf_alloc" does not exist'), context);
    expect(missing.code).toBe(ErrorCodes.INVALID_CONFIG);
    expect(missing.message).toBe(
      '[leaf] [test] missing table on db:5432: relation "leaf_alloc" does not exist (42P01) while taking a range; create the table with createSchema()',
    );
    expect(missing.details).toEqual({
      postgres: "schema",
      sqlState: "42P01",
      problem: 'missing table on db:5432: relation "leaf_alloc" does not exist (42P01)',
      fix: "create the table with createSchema()",
      host: "db:5432",
    });
    const denied = postgresError(server("42501", "permission denied for sequence s"), {
      ...context,
      table: "leaf_worker_lease",
      sequence: "leaf_worker_lease_grant_seq",
    });
    expect(denied.code).toBe(ErrorCodes.INVALID_CONFIG);
    expect(denied.details.fix).toBe(
      "grant it (GRANT SELECT, INSERT, UPDATE, DELETE ON leaf_worker_lease TO the user; USAGE on its schema and on the sequence leaf_worker_lease_grant_seq), or check the user and password in url",
    );
    expect(postgresError(server("3D000", "no db"), context).details.fix).toBe(
      "check the database in url, or create the database (CREATE DATABASE ...)",
    );
  });

  it("makes unreachable, read-only and cancelled servers UNAVAILABLE and a refused statement INVALID_ARGUMENT", () => {
    const down = postgresError(
      socket("ECONNREFUSED", "connect ECONNREFUSED 10.0.0.5:5432"),
      context,
    );
    expect(down.code).toBe(ErrorCodes.UNAVAILABLE);
    expect(down.details).toMatchObject({ postgres: "unreachable", unreachable: true });
    expect(down.details.fix).toBe(
      "check that the server is up and that url names it (host and port)",
    );
    const standby = postgresError(server("25006", "read-only transaction"), context);
    expect(standby.code).toBe(ErrorCodes.UNAVAILABLE);
    expect(standby.message).toContain("point url at the primary");
    const cancelled = postgresError(server("57014", "canceling statement"), context);
    expect(cancelled.code).toBe(ErrorCodes.UNAVAILABLE);
    expect(cancelled.details).toMatchObject({ postgres: "interrupted", sqlState: "57014" });
    expect(cancelled.details.unreachable).toBeUndefined();
    expect(postgresError(server("40P01", "deadlock detected"), context).code).toBe(
      ErrorCodes.UNAVAILABLE,
    );
    expect(postgresError(server("23505", "duplicate key"), context).code).toBe(
      ErrorCodes.INVALID_ARGUMENT,
    );
  });

  it("takes the caller's classification when given, and returns a LeafError as it is", () => {
    const refusal = new Error("the server is a standby (in recovery)");
    const error = postgresError(refusal, context, {
      kind: "read-only",
      sqlState: "25006",
      text: refusal.message,
      transient: false,
    });
    expect(error.details).toMatchObject({ postgres: "read-only", sqlState: "25006" });
    expect(error.message).toContain("the server is a standby (in recovery) (25006)");
    const leaf = new LeafError({ component: "x", code: ErrorCodes.CLOSED, message: "closed" });
    expect(postgresError(leaf, context)).toBe(leaf);
  });
});
