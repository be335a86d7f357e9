// LeafServerProcess and FakeClock against a real child process: a small HTTP server with the Leaf
// CLI's contract (fixtures/http-server-cli.ts, run through tsx), started, paused, killed, stopped,
// interrupted, refused, restarted on its port, under a fake clock and as pid 1 of a PID namespace.
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import {
  FakeClock,
  freePort,
  LeafServerProcess,
  type LeafServerProcessOptions,
  stopAll,
  TestkitError,
} from "../src/index";
import { processAlive, waitFor } from "./helpers";

const CLI = new URL("./fixtures/http-server-cli.ts", import.meta.url).pathname;
const dirs: string[] = [];

afterAll(async () => {
  await stopAll();
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

function folder(): string {
  const dir = mkdtempSync(join(tmpdir(), "leaf-testkit-server-"));
  dirs.push(dir);
  return dir;
}

async function serverOf(
  options: Partial<LeafServerProcessOptions> = {},
): Promise<LeafServerProcess> {
  return new LeafServerProcess({
    cli: CLI,
    label: "S",
    dir: join(folder(), "run"),
    port: await freePort(),
    config: {},
    readyTimeoutMs: 60_000,
    ...options,
  });
}

function errorOf(action: () => unknown): TestkitError {
  try {
    action();
  } catch (error) {
    expect(error).toBeInstanceOf(TestkitError);
    return error as TestkitError;
  }
  throw new Error("expected a TestkitError, nothing was thrown");
}

describe("LeafServerProcess", () => {
  it("starts, pauses, resumes, is killed and starts again on its port; stop() is SIGTERM", async () => {
    const server = await serverOf({ config: { name: "n", server: { adminToken: "t" } } });
    expect(server.running).toBe(false);
    expect(await server.tryStart()).toMatchObject({ started: true });
    expect(server.incarnation).toBe(1);
    const written = JSON.parse((await server.getText("/config"))!) as Record<string, unknown>;
    expect(written).toEqual({
      name: "n",
      dataDir: server.dataDir,
      log: { level: "warn" },
      server: { adminToken: "t", host: "127.0.0.1", port: server.port },
    });
    const firstPid = Number(await server.getText("/pid"));
    expect(firstPid).toBe(server.pid);

    server.pause();
    expect(await server.getText("/pid", 500)).toBeUndefined();
    expect(await server.ready()).toBe(false);
    server.resume();
    expect(await server.getText("/pid")).toBe(String(firstPid));

    expect(await server.kill()).toEqual({ code: null, signal: "SIGKILL" });
    expect(server.running).toBe(false);
    expect(processAlive(firstPid)).toBe(false);
    expect(() => server.pid).toThrow(expect.objectContaining({ code: "TESTKIT_NOT_RUNNING" }));
    expect(await server.getText("/pid")).toBeUndefined();

    await server.start();
    expect(server.incarnation).toBe(2);
    const url = `${server.url}/pid`;
    expect(Number(await (await fetch(url)).text())).toBe(server.pid);
    expect(server.pid).not.toBe(firstPid);
    await expect(server.tryStart()).rejects.toMatchObject({ code: "TESTKIT_BAD_OPTION" });

    // SIGTERM reaches a paused process once stop() has resumed it.
    server.pause();
    expect(await server.stop()).toEqual({ code: 0, signal: null });
    expect(server.output).toContain("SIGTERM: closing");
    const log = readFileSync(server.logFile, "utf8");
    expect(log).toContain("start #1");
    expect(log).toContain("==== exited: code null, signal SIGKILL");
    expect(log).toContain("start #2");
    expect(log).toContain("==== exited: code 0, signal null");

    // interrupt() is Ctrl-C (SIGINT), also to a paused process, once resumed.
    await server.start();
    server.pause();
    expect(await server.interrupt()).toEqual({ code: 0, signal: null });
    expect(server.output).toContain("SIGINT: closing");
    expect(server.running).toBe(false);
  }, 120_000);

  it("reports a refused start with its exit code and output; start() throws TESTKIT_START_FAILED", async () => {
    const server = await serverOf({ config: { refuse: true } });
    const outcome = await server.tryStart();
    expect(outcome).toMatchObject({ started: false, code: 1, signal: null });
    expect(outcome.started === false && outcome.output).toContain("refusing to start");
    expect(server.running).toBe(false);
    await expect(server.start()).rejects.toMatchObject({
      code: "TESTKIT_START_FAILED",
      message: expect.stringContaining("refusing to start"),
    });
    expect(server.incarnation).toBe(2);
  }, 120_000);

  it("reports the exit of a process whose folder was removed while its pipes were still open", async () => {
    // A process that leaves a child holding its stdout and stderr (a worker that outlived its
    // primary) is reported gone only once they end or OUTPUT_DRAIN_MS passed; a test's cleanup can
    // remove the folder in between. The exit is still reported, and nothing is thrown.
    const dir = folder();
    const server = await serverOf({ dir: join(dir, "run"), config: { orphanMs: 5000 } });
    await server.start();
    const gone = server.kill();
    await waitFor(() => !server.running, "the process exited");
    rmSync(dir, { recursive: true, force: true });
    expect(await gone).toEqual({ code: null, signal: "SIGKILL" });
  }, 120_000);

  it("kills a server that is not ready within readyTimeoutMs and says so", async () => {
    // The server runs, but /health/ready answers 503.
    const server = await serverOf({ config: { notReady: true }, readyTimeoutMs: 3000 });
    const outcome = await server.tryStart();
    expect(outcome).toMatchObject({ started: false, code: null, signal: "SIGKILL" });
    expect(outcome.started === false && outcome.output).toContain("not ready within 3000 ms");
    expect(server.running).toBe(false);
  }, 120_000);

  it("runs the server under a FakeClock that moves while it runs", async () => {
    const dir = folder();
    const clock = new FakeClock({ file: join(dir, "clock.rc") });
    const server = await serverOf({ dir, clock });
    await server.start();
    const skew = async () => Number(await server.getText("/now")) - Date.now();
    expect(Math.abs(await skew())).toBeLessThan(60_000);
    clock.set(-3_600_000);
    expect(clock.offsetMs).toBe(-3_600_000);
    await waitFor(async () => (await skew()) < -3_500_000, "the server's clock 1 h behind");
    clock.set(0);
    await waitFor(async () => Math.abs(await skew()) < 60_000, "the server's clock back");
    const pid = server.pid;
    await server.kill();
    expect(processAlive(pid)).toBe(false);
  }, 120_000);

  it("runs the server as pid 1 of its own PID namespace (root)", async () => {
    const server = await serverOf({ pidNamespace: true });
    await server.start();
    expect(await server.getText("/pid")).toBe("1");
    const unshare = server.pid;
    expect(readFileSync(`/proc/${unshare}/cmdline`, "utf8").split("\0")[0]).toBe("unshare");
    expect(errorOf(() => server.pause()).code).toBe("TESTKIT_BAD_OPTION");
    expect((await server.stop()).signal).toBe("SIGKILL");
    await waitFor(async () => !(await server.ready()), "the namespaced server gone");
  }, 120_000);

  it("refuses bad options, naming the option, the value and what was expected", () => {
    const base = { cli: CLI, label: "S", dir: "/tmp/x", port: 4000, config: {} };
    const port = errorOf(() => new LeafServerProcess({ ...base, port: 70_000 }));
    expect(port.code).toBe("TESTKIT_BAD_OPTION");
    expect(port.message).toBe(
      "[leaf] [testkit] LeafServerProcess option port: 70000, expected a whole number from 1 to 65535",
    );
    expect(errorOf(() => new LeafServerProcess({ ...base, cli: "" })).message).toContain(
      'option cli: "", expected a non-empty string',
    );
    expect(
      errorOf(() => new LeafServerProcess({ ...base, readyTimeoutMs: 0.5 })).message,
    ).toContain("option readyTimeoutMs: 0.5, expected a whole number of ms above 0");
    expect(
      errorOf(() => new LeafServerProcess({ ...base, config: null as never })).message,
    ).toContain("option config: null");
    expect(errorOf(() => new FakeClock({ file: join(folder(), "c.rc") }).set(1.5)).message).toBe(
      "[leaf] [testkit] a clock offset is a whole number of ms, got 1.5",
    );
  });
});
