// LeafError's message and the helper that quotes it inside another message.
import { describe, expect, it } from "vitest";
import { bareMessage } from "../src/adapter";
import { ErrorCodes, LeafError } from "../src/index";

describe("bareMessage", () => {
  it("drops a LeafError's [leaf] [component] start, and only that", () => {
    const error = new LeafError({
      component: "registry-zk",
      code: ErrorCodes.UNAVAILABLE,
      message: "ZooKeeper at [::1]:2181 did not answer",
    });
    expect(error.message).toBe("[leaf] [registry-zk] ZooKeeper at [::1]:2181 did not answer");
    expect(bareMessage(error)).toBe("ZooKeeper at [::1]:2181 did not answer");
  });

  it("keeps any other error's message, and reads a string or a value as text", () => {
    expect(bareMessage(new Error("connect ECONNREFUSED 127.0.0.1:3306"))).toBe(
      "connect ECONNREFUSED 127.0.0.1:3306",
    );
    expect(bareMessage("[leaf] [segment] tag t is not served")).toBe("tag t is not served");
    expect(bareMessage("[leaf] no component")).toBe("[leaf] no component");
    expect(bareMessage(42)).toBe("42");
  });
});
