// Runs the server's CLI (from source, through tsx) as a child process, as an operator would, and
// reads its answers: shared by the tests that need a real process (signals, exit codes).
import { spawnNode } from "@leaf/testkit";

/** The CLI's source: the test kit runs .ts files with tsx. */
export const CLI = new URL("../src/cli.ts", import.meta.url).pathname;

/** Starts the CLI in `cwd` and resolves once it printed its URLs (rejects when it exits first). */
export async function startCli(cwd: string, env: Record<string, string>, args: string[] = []) {
  // No drain unless a test asks for one: the tests stop servers with SIGTERM many times.
  const child = spawnNode(CLI, args, { cwd, env: { LEAF_SERVER_DRAIN_MS: "0", ...env } });
  let stdout = "";
  let stderr = "";
  child.stdout!.setEncoding("utf8").on("data", (chunk: string) => {
    stdout += chunk;
  });
  child.stderr!.setEncoding("utf8").on("data", (chunk: string) => {
    stderr += chunk;
  });
  const exited = new Promise<number | null>((resolve) =>
    child.once("exit", (code) => resolve(code)),
  );
  await new Promise<void>((resolve, reject) => {
    const timer = setInterval(() => {
      if (stdout.includes("Stop with Ctrl-C")) {
        clearInterval(timer);
        resolve();
      }
    }, 50);
    void exited.then((code) => {
      clearInterval(timer);
      reject(
        new Error(`the server exited with ${code} before it was ready:\n${stdout}\n${stderr}`),
      );
    });
  });
  return { child, exited, output: () => stdout, errors: () => stderr };
}

/** GET `url`: its status and body as text. */
export async function text(url: string): Promise<{ status: number; body: string }> {
  const res = await fetch(url);
  return { status: res.status, body: await res.text() };
}
