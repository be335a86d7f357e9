// Leaf servers as real processes for the client's fault tests: the test kit's LeafServerProcess
// running the built CLI of @leaf/server, on a fixed port so that a restart comes back at the same
// URL.
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { freePort, LeafServerProcess } from "@leaf/testkit";

/**
 * The built CLI (`pnpm turbo run build` builds it before the tests: @leaf/server is a dependency).
 */
const CLI = join(
  dirname(createRequire(import.meta.url).resolve("@leaf/server/package.json")),
  "dist",
  "cli.js",
);

/**
 * A server process (not started) on a free port with `config`, its files in `dir`; no drain on
 * SIGTERM, 90 s to become ready.
 */
export async function leafProcess(
  label: string,
  dir: string,
  config: Record<string, unknown>,
): Promise<LeafServerProcess> {
  return new LeafServerProcess({
    cli: CLI,
    label,
    dir,
    port: await freePort(),
    config: { ...config, server: { ...(config.server as object | undefined), drainMs: 0 } },
    readyTimeoutMs: 90_000,
  });
}
