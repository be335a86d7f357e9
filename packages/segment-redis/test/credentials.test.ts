// A Redis that requires a password, reached with a wrong one and with none: the store's error says
// the credentials were refused (not that Redis did not answer), without printing the password.
import { ErrorCodes, isLeafError } from "@leaf/core";
import { type RedisHandle, startRedis, stopAll } from "@leaf/testkit";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { RedisSegmentStore } from "../src/index";
import { freshNamespace } from "./helpers";

let redis: RedisHandle;

beforeAll(async () => {
  redis = await startRedis({ useEnv: false });
  const admin = new Redis(redis.url);
  await admin.config("SET", "requirepass", "right-secret");
  admin.disconnect();
}, 60_000);

afterAll(() => stopAll());

async function failureOf(password: string): Promise<unknown> {
  const url = new URL(redis.url);
  url.password = password;
  const store = new RedisSegmentStore({ url: url.toString(), namespace: freshNamespace("auth") });
  try {
    await store.listTags();
    return undefined;
  } catch (error) {
    return error;
  } finally {
    await store.close();
  }
}

describe("a Redis that refuses the credentials", () => {
  it.each([
    ["a wrong password", "wrong-secret", /WRONGPASS/],
    ["no password", "", /NOAUTH/],
  ])("with %s: UNAVAILABLE saying the credentials were refused", async (_, password, word) => {
    const error = await failureOf(password);
    expect(isLeafError(error) && error.code).toBe(ErrorCodes.UNAVAILABLE);
    const { message } = error as Error;
    expect(message).toMatch(/refused the credentials \(/);
    expect(message).toMatch(word);
    expect(message).toMatch(/check the user and password in the URL/);
    expect(message).not.toMatch(/did not answer/);
    expect(message).not.toContain("wrong-secret");
  });
});
