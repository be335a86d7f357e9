// ChildLines's waits when the child exits first, and startedRetrying's retries.
import { spawn } from "node:child_process";
import { describe, expect, it } from "vitest";
import { ChildLines, startedRetrying } from "../src/index";

describe("ChildLines", () => {
  it("names the exit code and shows the child's stderr when it exits before the line", async () => {
    const script =
      'console.log("one"); console.error("boom: the store timed out"); process.exit(3);';
    const lines = new ChildLines(spawn(process.execPath, ["-e", script]));
    await expect(lines.until((l) => l.includes("two"), "the second line")).rejects.toThrow(
      /exited with code 3 before the second line; it printed: one\nand on stderr: boom: the store timed out/,
    );
  });

  it("names the signal of a child killed before the line", async () => {
    const lines = new ChildLines(spawn(process.execPath, ["-e", "setInterval(() => {}, 1000)"]));
    lines.child.kill("SIGKILL");
    await expect(lines.next("a line")).rejects.toThrow(/exited on SIGKILL before a line/);
  });

  it("still sees a line the child printed just before it exited", async () => {
    const lines = new ChildLines(
      spawn(process.execPath, ["-e", 'process.stdout.write("last\\n"); process.exit(0);']),
    );
    await lines.exited;
    await expect(lines.next("the last line")).resolves.toBe("last");
  });
});

describe("startedRetrying", () => {
  const refusal = (code: string) => Object.assign(new Error(code), { code });

  it("tries again while the start fails with a listed code, reporting each retry", async () => {
    let attempts = 0;
    const retried: unknown[] = [];
    const value = await startedRetrying(
      async () => {
        attempts++;
        if (attempts < 3) throw refusal("UNAVAILABLE");
        return "held";
      },
      {
        codes: ["UNAVAILABLE"],
        deadline: Date.now() + 5000,
        pauseMs: 1,
        onRetry: (e) => retried.push(e),
      },
    );
    expect(value).toBe("held");
    expect(attempts).toBe(3);
    expect(retried).toHaveLength(2);
  });

  it("throws an unlisted code at once, and a listed one past the deadline", async () => {
    let attempts = 0;
    await expect(
      startedRetrying(
        async () => {
          attempts++;
          throw refusal("CONFIG_INVALID");
        },
        { codes: ["UNAVAILABLE"], deadline: Date.now() + 5000 },
      ),
    ).rejects.toThrow("CONFIG_INVALID");
    expect(attempts).toBe(1);
    await expect(
      startedRetrying(
        async () => {
          throw refusal("UNAVAILABLE");
        },
        { codes: ["UNAVAILABLE"], deadline: Date.now() + 100, pauseMs: 10 },
      ),
    ).rejects.toThrow("UNAVAILABLE");
  });
});
