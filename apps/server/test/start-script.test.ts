// `pnpm start`, as the README tells people to run it: a SIGTERM to pnpm itself must stop the server
// gracefully (lease released, port closed), not leave it running as an orphan.
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freePort } from "@leaf/testkit";
import { afterAll, describe, expect, it } from "vitest";

const root = new URL("../../..", import.meta.url).pathname;
const dirs: string[] = [];
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

async function until(what: string, check: () => boolean | Promise<boolean>, ms: number) {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

async function answers(url: string): Promise<boolean> {
  return fetch(url).then(
    (r) => r.ok,
    () => false,
  );
}

describe("pnpm start", () => {
  it("stops the server gracefully when pnpm gets SIGTERM", async () => {
    const dataDir = mkdtempSync(join(tmpdir(), "leaf-pnpm-start-"));
    dirs.push(dataDir);
    const port = await freePort();
    const child = spawn("pnpm", ["start"], {
      cwd: root,
      env: {
        ...process.env,
        LEAF_SERVER_PORT: String(port),
        LEAF_DATA_DIR: dataDir,
        LEAF_SERVER_DRAIN_MS: "200",
      },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let output = "";
    child.stdout.setEncoding("utf8").on("data", (c: string) => {
      output += c;
    });
    child.stderr.setEncoding("utf8").on("data", (c: string) => {
      output += c;
    });
    const base = `http://127.0.0.1:${port}`;
    try {
      await until("the server to answer", () => answers(`${base}/health/ready`), 180_000);
      const lockDir = join(dataDir, "registry-local", "leaf");
      expect(readdirSync(lockDir).some((f) => f.endsWith(".lock"))).toBe(true);
      child.kill("SIGTERM");
      // The port closes and the worker-id lock is released: the server really stopped.
      await until("the port to close", async () => !(await answers(`${base}/health/live`)), 30_000);
      await until(
        "the worker-id lock to be released",
        () => !readdirSync(lockDir).some((f) => f.endsWith(".lock")),
        30_000,
      );
      expect(existsSync(join(dataDir, "segments"))).toBe(true);
    } catch (error) {
      throw new Error(`${(error as Error).message}\n--- pnpm start printed:\n${output}`);
    } finally {
      child.kill("SIGKILL");
    }
  }, 240_000);
});
