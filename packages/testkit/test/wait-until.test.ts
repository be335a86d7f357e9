import { describe, expect, it } from "vitest";
import { pollFor, waitUntil } from "../src/index";

describe("pollFor and waitUntil", () => {
  it("resolves with the first answer that is not undefined", async () => {
    let calls = 0;
    const found = await pollFor(async () => (++calls >= 3 ? `call ${calls}` : undefined), 5_000, 1);
    expect(found).toBe("call 3");
    expect(calls).toBe(3);
  });

  it("resolves with undefined after the timeout, having asked at least once", async () => {
    let calls = 0;
    expect(await pollFor(() => void calls++, -1, 1)).toBeUndefined();
    expect(calls).toBe(1);
    expect(await pollFor(() => undefined, 30, 5)).toBeUndefined();
  });

  it("keeps a falsy answer other than undefined (0, false, an empty string)", async () => {
    expect(await pollFor(() => 0, 1_000)).toBe(0);
    expect(await pollFor(() => false, 1_000)).toBe(false);
  });

  it("waitUntil names what it waited for when it times out", async () => {
    await expect(waitUntil("the moon", () => false, 20, 5)).rejects.toThrow(
      "timed out waiting for the moon",
    );
    let n = 0;
    await waitUntil("three calls", () => ++n === 3, 5_000, 1);
    expect(n).toBe(3);
  });
});
