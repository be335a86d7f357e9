// SIGTERM under keep-alive load, measured from outside with wrk (8 connections; it honours
// `Connection: close` by reconnecting): every request wrk sent is answered, with an id or with the
// project's SHUTTING_DOWN and a Retry-After; none is reset or left without an answer. Once the port
// is closed wrk keeps reconnecting to it: each refused connection is counted by wrk as a "write"
// error (its non-blocking connect fails when the request is written), so those are not failures
// of a request sent. A reset or cut answer shows as a "read" error, an unanswered one as a timeout.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freePort, stopAll } from "@leaf/testkit";
import { afterAll, describe, expect, it } from "vitest";
import { startCli } from "./cli-process";
import { otherAnswers, wrk } from "./wrk";

const dirs: string[] = [];
afterAll(async () => {
  await stopAll();
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

async function stopUnderLoad(path: string) {
  const cwd = mkdtempSync(join(tmpdir(), "leaf-server-stop-"));
  dirs.push(cwd);
  const port = await freePort();
  const server = await startCli(cwd, {
    LEAF_SERVER_PORT: String(port),
    LEAF_SERVER_DRAIN_MS: "1500",
  });
  // SIGTERM 2.5 s into a 7 s run: 1.5 s of drain, then the port closes with wrk still running.
  const run = wrk(`http://127.0.0.1:${port}${path}`, 7);
  setTimeout(() => server.child.kill("SIGTERM"), 2500);
  const { result, output } = await run;
  return { result, output, exitCode: await server.exited, log: server.output() };
}

describe("SIGTERM under keep-alive load, measured with wrk", () => {
  it.each([
    ["Java Leaf's plain-text path", "/api/segment/get/leaf-segment-test"],
    ["the JSON path", "/api/v1/snowflake/id"],
  ])("answers every request sent on %s: none reset, none cut", async (_, path) => {
    const { result, output, exitCode, log } = await stopUnderLoad(path);
    const context = `${output}\n${log}`;
    expect(exitCode, context).toBe(0);
    // Every request sent got a whole answer...
    expect({ read: result.read, timeout: result.timeout }, context).toEqual({
      read: 0,
      timeout: 0,
    });
    // ...and each is an id, or the project's SHUTTING_DOWN with a Retry-After.
    expect(otherAnswers(result), context).toEqual([]);
    expect(result.answers.id ?? 0, context).toBeGreaterThan(1000);
    const answered = Object.values(result.answers).reduce((a, b) => a + b, 0);
    expect(answered, context).toBe(result.requests);
    // The port did close while wrk ran: its later connections were refused.
    expect(result.write, context).toBeGreaterThan(0);
  });
});
