// The two kinds of handle: a private server the kit runs (and can break), and an external server
// named by a LEAF_TEST_* variable (used as is; fault methods refuse with a clear error).
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ENV_VARS } from "./binaries";
import { forgetDir, removeDirSync, type Tracked, track, untrack, watchDir } from "./cleanup";
import { TestkitError } from "./errors";
import { LOOPBACK } from "./ports";
import type { ServerProcess } from "./server-process";
import type { ServiceHandle, ServiceKind } from "./types";

/** Prefix of every temp folder the kit creates under os.tmpdir(). */
export const TEMP_PREFIX = "leaf-testkit-";

/**
 * Creates the temp folder of a new instance and tells the watchdog about it before any server is
 * started from it.
 */
export async function makeInstanceDir(kind: ServiceKind): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), `${TEMP_PREFIX}${kind}-`));
  watchDir(dir);
  return dir;
}

/** Removes an instance folder and tells the watchdog it is gone. */
export async function removeInstanceDir(dir: string): Promise<void> {
  await rm(dir, { recursive: true, force: true, maxRetries: 10, retryDelay: 50 });
  forgetDir(dir);
}

/** A private server: one process in one temp folder, on one port for its whole life. */
export class LocalServer implements ServiceHandle, Tracked {
  readonly external = false;
  readonly host = LOOPBACK;
  private disposed = false;

  constructor(
    readonly kind: ServiceKind,
    readonly dir: string,
    readonly logFile: string,
    protected readonly server: ServerProcess,
    private readonly urlOf: (port: number) => string,
  ) {
    track(this);
  }

  get port(): number {
    return this.server.port;
  }

  get url(): string {
    return this.urlOf(this.port);
  }

  get pid(): number | undefined {
    return this.server.pid;
  }

  get running(): boolean {
    return this.server.running;
  }

  async kill(): Promise<void> {
    this.requireUsable("kill");
    return this.server.kill();
  }

  pause(): void {
    this.requireUsable("pause");
    this.server.pause();
  }

  resume(): void {
    this.requireUsable("resume");
    this.server.resume();
  }

  async stop(): Promise<void> {
    this.requireUsable("stop");
    return this.server.stop();
  }

  async start(): Promise<void> {
    this.requireUsable("start");
    return this.server.start();
  }

  async restart(): Promise<void> {
    await this.stop();
    await this.start();
  }

  async dispose(): Promise<void> {
    if (this.disposed) return;
    this.disposed = true;
    untrack(this);
    try {
      // The data is about to be deleted, so a graceful shutdown (0.3 s for ZooKeeper) buys nothing.
      await this.server.kill();
    } finally {
      await removeInstanceDir(this.dir);
    }
  }

  killNow(): void {
    this.disposed = true;
    this.server.killNow();
    removeDirSync(this.dir);
  }

  private requireUsable(action: string): void {
    if (this.disposed) {
      throw new TestkitError(
        "TESTKIT_DISPOSED",
        `cannot ${action} the ${this.kind} server that was on 127.0.0.1:${this.port}: it was disposed`,
      );
    }
  }
}

/** An existing server from a LEAF_TEST_* variable: used as is, never broken. */
export class ExternalServer implements ServiceHandle, Tracked {
  readonly external = true;
  readonly pid = undefined;
  readonly running = true;
  readonly dir = undefined;
  readonly logFile = undefined;

  constructor(
    readonly kind: ServiceKind,
    readonly host: string,
    readonly port: number,
    readonly url: string,
  ) {
    track(this);
  }

  kill(): Promise<void> {
    return Promise.reject(this.refuse("kill"));
  }

  pause(): void {
    throw this.refuse("pause");
  }

  resume(): void {
    throw this.refuse("resume");
  }

  stop(): Promise<void> {
    return Promise.reject(this.refuse("stop"));
  }

  start(): Promise<void> {
    return Promise.reject(this.refuse("start"));
  }

  restart(): Promise<void> {
    return Promise.reject(this.refuse("restart"));
  }

  async dispose(): Promise<void> {
    untrack(this);
  }

  killNow(): void {
    // Nothing of ours runs.
  }

  private refuse(action: string): TestkitError {
    return new TestkitError(
      "TESTKIT_EXTERNAL_SERVER",
      `cannot ${action} an external server (${ENV_VARS[this.kind]}); fault tests must check ` +
        "`handle.external` (or isExternal()) and skip with test.skipIf, or pass { useEnv: false }",
    );
  }
}

/** The value of the LEAF_TEST_* variable for `kind`, when set and not empty. */
export function externalSetting(kind: ServiceKind): string | undefined {
  const value = process.env[ENV_VARS[kind]]?.trim();
  return value ? value : undefined;
}

/**
 * Whether startX() would use an external server for `kind` (its LEAF_TEST_* variable is set).
 * Known before any server starts, so it works in `test.skipIf(isExternal("redis"))`.
 */
export function isExternal(kind: ServiceKind): boolean {
  return externalSetting(kind) !== undefined;
}

/** Error for a LEAF_TEST_* value that cannot be parsed or reached. */
export function badEnv(kind: ServiceKind, value: string, problem: string): TestkitError {
  return new TestkitError("TESTKIT_BAD_ENV", `${ENV_VARS[kind]}=${value}: ${problem}`);
}

/**
 * Starts `handle`'s server on a free port; disposes of the handle (and its folder) when that fails.
 */
export async function startOrDispose<T extends LocalServer>(
  handle: T,
  server: ServerProcess,
): Promise<T> {
  try {
    await server.startOnFreePort();
  } catch (error) {
    await handle.dispose();
    throw error;
  }
  return handle;
}

/**
 * Reads a LEAF_TEST_* URL of a server: its protocol must be one of `protocols`; the port defaults
 * to `defaultPort`. Throws TESTKIT_BAD_ENV naming the variable and the expected form.
 */
export function parseServiceUrl(
  kind: ServiceKind,
  setting: string,
  protocols: string[],
  defaultPort: number,
  expected: string,
): { url: URL; host: string; port: number } {
  let url: URL;
  try {
    url = new URL(setting);
  } catch {
    throw badEnv(kind, setting, `not a URL; expected ${expected}`);
  }
  if (!protocols.includes(url.protocol)) {
    throw badEnv(kind, setting, `expected a ${protocols[0]}// URL`);
  }
  const host = url.hostname.replace(/^\[|\]$/g, "");
  const port = url.port ? Number(url.port) : defaultPort;
  return { url, host, port };
}
