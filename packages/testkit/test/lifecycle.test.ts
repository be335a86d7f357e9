import { once } from "node:events";
import { existsSync } from "node:fs";
import net from "node:net";
import { tmpdir } from "node:os";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import {
  freePort,
  runNode,
  type ServiceHandle,
  type ServiceKind,
  spawnNode,
  startEtcd,
  startMysql,
  startPostgres,
  startRedis,
  startZookeeper,
  stopAll,
  TestkitError,
} from "../src/index";
import { processAlive, waitFor } from "./helpers";

const child = fileURLToPath(new URL("./fixtures/server-child.ts", import.meta.url));
const starters: Record<ServiceKind, () => Promise<ServiceHandle>> = {
  mysql: () => startMysql({ useEnv: false }),
  postgres: () => startPostgres({ useEnv: false }),
  redis: () => startRedis({ useEnv: false }),
  zookeeper: () => startZookeeper({ useEnv: false }),
  etcd: () => startEtcd({ useEnv: false }),
};
const kinds = Object.keys(starters) as ServiceKind[];

interface ChildReport {
  pid: number;
  dir: string;
  watchdog: number;
}

/** Starts the fixture and waits for the JSON line describing its server. */
async function startChild(kind: ServiceKind, mode: "exit" | "wait") {
  const testProcess = spawnNode(child, [kind, mode]);
  let output = "";
  testProcess.stdout?.setEncoding("utf8");
  const report = await new Promise<ChildReport>((resolve, reject) => {
    testProcess.stdout?.on("data", (chunk: string) => {
      output += chunk;
      const line = output.split("\n").find((candidate) => candidate.startsWith("{"));
      if (line) resolve(JSON.parse(line) as ChildReport);
    });
    testProcess.once("exit", (code) => {
      if (!output.includes("{")) reject(new Error(`fixture exited with ${code} before reporting`));
    });
  });
  return { testProcess, report };
}

async function expectCleanedUp(report: ChildReport): Promise<void> {
  await waitFor(() => !processAlive(report.pid), `server pid ${report.pid} still runs`);
  await waitFor(() => !existsSync(report.dir), `${report.dir} still exists`);
  await waitFor(() => !processAlive(report.watchdog), `watchdog ${report.watchdog} still runs`);
}

describe("cleanup", () => {
  afterAll(() => stopAll());

  it.each(kinds)(
    "dispose() of a %s server ends its process and removes its folder",
    async (kind) => {
      const handle = await starters[kind]();
      const { pid, dir } = handle;
      expect(pid).toBeTypeOf("number");
      expect(dir?.startsWith(tmpdir())).toBe(true);
      expect(dir).toContain("leaf-testkit-");
      expect(processAlive(pid!)).toBe(true);
      await handle.dispose();
      expect(processAlive(pid!)).toBe(false);
      expect(existsSync(dir!)).toBe(false);
      expect(handle.running).toBe(false);
    },
  );

  it("refuses to start a disposed server again", async () => {
    const redis = await startRedis({ useEnv: false });
    await redis.dispose();
    await redis.dispose();
    await expect(redis.start()).rejects.toThrow(/disposed/);
  });

  it("stopAll() ends every server and child process this process started", async () => {
    const servers = await Promise.all([
      startRedis({ useEnv: false }),
      startRedis({ useEnv: false }),
    ]);
    const sleeper = spawnNode(fileURLToPath(new URL("./fixtures/echo.ts", import.meta.url)), [
      "hang",
    ]);
    const paused = servers[1]!;
    paused.pause();
    const pids = servers.map((server) => server.pid!);
    await stopAll();
    for (const pid of pids) expect(processAlive(pid)).toBe(false);
    for (const server of servers) expect(existsSync(server.dir!)).toBe(false);
    await waitFor(() => sleeper.exitCode !== null || sleeper.signalCode !== null, "child ended");
  });

  // Concurrent: each waits mostly for a child process to start, and they share nothing.
  it.concurrent.for(kinds)(
    "the watchdog stops the %s server of a test process that was SIGKILLed",
    async (kind, { expect }) => {
      const { testProcess, report } = await startChild(kind, "wait");
      expect(processAlive(report.pid)).toBe(true);
      testProcess.kill("SIGKILL");
      await expectCleanedUp(report);
    },
  );

  it("a test process that exits without stopAll() takes its server with it", async () => {
    const { report } = await startChild("redis", "exit");
    await expectCleanedUp(report);
  });

  it("a test process ended by SIGTERM stops its server", async () => {
    const { testProcess, report } = await startChild("redis", "wait");
    testProcess.kill("SIGTERM");
    const [, signal] = await once(testProcess, "exit");
    expect(signal).toBe("SIGTERM");
    await expectCleanedUp(report);
  });
});

describe("missing servers", () => {
  it("name the program, the install script and the variable to set instead", async () => {
    const failure = await startRedis({ useEnv: false, redisServer: "/nonexistent/redis-server" })
      .then(() => undefined)
      .catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(TestkitError);
    expect((failure as TestkitError).code).toBe("TESTKIT_BINARY_MISSING");
    expect((failure as Error).message).toMatch(
      /^\[leaf\] \[testkit\] .*\/nonexistent\/redis-server/,
    );
    expect((failure as Error).message).toContain("bash scripts/install-services.sh");
    expect((failure as Error).message).toContain("apt-get install redis-server");
    expect((failure as Error).message).toContain("LEAF_TEST_REDIS_URL");
  });
});

describe("runNode", () => {
  it("runs a TypeScript file and reports its exit code and output", async () => {
    const script = fileURLToPath(new URL("./fixtures/echo.ts", import.meta.url));
    const result = await runNode(script, ["a", "b"], { env: { LEAF_ECHO: "env-value" } });
    expect(result).toMatchObject({ code: 3, signal: null, timedOut: false });
    expect(JSON.parse(result.stdout)).toEqual({ args: ["a", "b"], env: "env-value" });
    expect(result.stderr).toContain("to stderr");
  });

  it("kills a script that runs longer than timeoutMs", async () => {
    const script = fileURLToPath(new URL("./fixtures/echo.ts", import.meta.url));
    const result = await runNode(script, ["hang"], { timeoutMs: 500 });
    expect(result).toMatchObject({ code: null, signal: "SIGKILL", timedOut: true });
  });
});

describe("freePort", () => {
  it("returns a loopback port that can be bound at once", async () => {
    const port = await freePort();
    const server = net.createServer();
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(port, "127.0.0.1", resolve);
    });
    await new Promise((resolve) => server.close(resolve));
  });
});
