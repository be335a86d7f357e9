// Leaf servers as real processes for the client's fault tests and bench: the built CLI of
// @leaf/server with a JSON config file, on a fixed port so that a restart comes back at the same URL;
// killed with SIGKILL, stopped with SIGTERM, started again.
import type { ChildProcess } from "node:child_process";
import { writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { freePort, spawnNode } from "@leaf/testkit";

/** The built CLI (`pnpm turbo run build` builds it before the tests: @leaf/server is a dependency). */
const CLI = join(
  dirname(createRequire(import.meta.url).resolve("@leaf/server/package.json")),
  "dist",
  "cli.js",
);

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** One Leaf server process, restartable on its port and data folder. */
export class LeafProcess {
  private child: ChildProcess | undefined;
  private exited: Promise<void> | undefined;
  output = "";

  private constructor(
    readonly label: string,
    readonly port: number,
    private readonly configFile: string,
  ) {}

  /** Writes the config (`config` plus host, port, data folder) and picks a free port. */
  static async create(
    label: string,
    dir: string,
    config: Record<string, unknown>,
  ): Promise<LeafProcess> {
    const port = await freePort();
    const configFile = join(dir, `${label}.json`);
    const server = (config.server ?? {}) as Record<string, unknown>;
    writeFileSync(
      configFile,
      JSON.stringify({
        ...config,
        dataDir: join(dir, `${label}-data`),
        log: { level: "warn" },
        server: { ...server, host: "127.0.0.1", port, drainMs: 0 },
      }),
    );
    return new LeafProcess(label, port, configFile);
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  /** Starts the process; resolves once /health/ready answers 200. */
  async start(timeoutMs = 90_000): Promise<void> {
    const child = spawnNode(CLI, ["--config", this.configFile]);
    this.child = child;
    const keep = (chunk: string) => {
      this.output = (this.output + chunk).slice(-20_000);
    };
    child.stdout!.setEncoding("utf8").on("data", keep);
    child.stderr!.setEncoding("utf8").on("data", keep);
    let gone = false;
    this.exited = new Promise((resolve) =>
      child.once("exit", () => {
        gone = true;
        if (this.child === child) this.child = undefined;
        resolve();
      }),
    );
    const deadline = performance.now() + timeoutMs;
    while (performance.now() < deadline) {
      if (gone)
        throw new Error(
          `[leaf] [client test] server ${this.label} exited at start:\n${this.output}`,
        );
      if (await this.ready()) return;
      await sleep(50);
    }
    await this.kill();
    throw new Error(
      `[leaf] [client test] server ${this.label} not ready in ${timeoutMs} ms:\n${this.output}`,
    );
  }

  async ready(): Promise<boolean> {
    try {
      const res = await fetch(`${this.url}/health/ready`, { signal: AbortSignal.timeout(2000) });
      await res.arrayBuffer();
      return res.status === 200;
    } catch {
      return false;
    }
  }

  /** SIGKILL: a crash. Resolves once the process is gone. */
  async kill(): Promise<void> {
    if (!this.child) return;
    this.child.kill("SIGKILL");
    await this.exited;
  }

  /** SIGTERM: a graceful stop (drain 0). */
  async stop(): Promise<void> {
    if (!this.child) return;
    this.child.kill("SIGTERM");
    await this.exited;
  }
}
