// The construction convention's backend check: exactly one of url and client, of the right kind,
// and an error that says what to write instead of an option name from before the convention.
import { describe, expect, it } from "vitest";
import { checkBackend } from "../src/adapter";
import { ErrorCodes, LeafError } from "../src/index";

interface FakeClient {
  query(): void;
}
const rules = {
  component: "registry-test",
  url: "a test URL test://host",
  client: {
    what: "a test client (with query())",
    is: (value: unknown): value is FakeClient =>
      typeof (value as FakeClient | undefined)?.query === "function",
  },
};

function failure(options: Record<string, unknown> | undefined): LeafError {
  try {
    checkBackend(options, rules);
  } catch (error) {
    if (error instanceof LeafError) return error;
    throw error;
  }
  throw new Error(`expected ${JSON.stringify(options)} to be refused`);
}

describe("checkBackend", () => {
  it("takes a url, or a client that it hands back as it is", () => {
    expect(checkBackend({ url: "test://a" }, rules)).toEqual({ url: "test://a" });
    const client = { query() {} };
    expect(checkBackend({ client }, rules).client).toBe(client);
  });

  it("refuses neither, both, and values of the wrong kind, naming the option and the value", () => {
    const none = failure({});
    expect(none.code).toBe(ErrorCodes.INVALID_CONFIG);
    expect(none.message).toContain("a test URL test://host (or a client: a test client");
    const both = failure({ url: "test://a", client: { query() {} } });
    expect(both.message).toContain("either url or client, not both");
    const badUrl = failure({ url: 42 });
    expect(badUrl.details).toMatchObject({ key: "url", value: 42 });
    expect(failure({ url: "" }).details).toMatchObject({ key: "url" });
    const badClient = failure({ client: { get() {} } });
    expect(badClient.details).toMatchObject({ key: "client", expected: rules.client.what });
    expect(failure(undefined).details).toMatchObject({ key: "url" });
  });

  it("refuses any client for an adapter that takes none, saying why", () => {
    const urlOnly = {
      component: "registry-test",
      url: "a test URL",
      noClient: "it owns its session",
    };
    expect(checkBackend({ url: "x" }, urlOnly)).toEqual({ url: "x" });
    expect(() => checkBackend({ client: { query() {} } }, urlOnly)).toThrow(
      "expected no client: give url (it owns its session)",
    );
    expect(() => checkBackend({}, urlOnly)).toThrow(/invalid url: .*; expected a test URL$/);
  });

  it("uses the adapter's own judge of a url when it has one (a list of cluster nodes)", () => {
    const list = {
      ...rules,
      isUrl: (value: unknown): value is readonly string[] =>
        Array.isArray(value) && value.length > 0 && value.every((v) => typeof v === "string"),
    };
    expect(checkBackend({ url: ["a", "b"] }, list)).toEqual({ url: ["a", "b"] });
    expect(() => checkBackend({ url: [] }, list)).toThrow(/invalid url/);
  });
});
