// The Leaf server processes the harness starts, SIGKILLs and starts again on the same port and data
// folder: the test kit's LeafServerProcess, running the built CLI of @leaf/server.
import { existsSync, statSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";

export {
  LeafServerProcess as LeafProcess,
  type LeafServerProcessOptions as LeafProcessOptions,
  type StartOutcome,
} from "@leaf/testkit";

/**
 * The built CLI of @leaf/server, or NEMESIS_SERVER_CLI (a copy of the build with a fix taken out,
 * made by scripts/copy-build.sh). Throws, saying how to build it, when it is missing.
 */
export function serverCli(): string {
  const override = process.env.NEMESIS_SERVER_CLI;
  if (override) {
    if (!existsSync(override)) {
      throw new Error(`[leaf] [chaos] NEMESIS_SERVER_CLI names ${override}, which does not exist`);
    }
    return override;
  }
  const pkg = createRequire(import.meta.url).resolve("@leaf/server/package.json");
  const cli = join(dirname(pkg), "dist", "cli.js");
  if (!existsSync(cli)) {
    throw new Error(
      `[leaf] [chaos] the server is not built: ${cli} is missing; run \`pnpm --filter "@leaf/server..." build\` ` +
        "(or `pnpm test:chaos`, which builds it first)",
    );
  }
  return cli;
}

/** Modification time of the built CLI, for the report (which build was tested). */
export function serverBuildTime(): string {
  return statSync(serverCli()).mtime.toISOString();
}
