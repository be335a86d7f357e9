#!/usr/bin/env node
// The `leaf-server` and `leaf` commands. The CLI itself is built to dist/cli.js; this launcher is a
// plain file so that package managers can link the commands before anything is built.
import { existsSync } from "node:fs";

const cli = new URL("../dist/cli.js", import.meta.url);
if (!existsSync(cli)) {
  console.error(
    "leaf: the server is not built yet (no dist/cli.js); run `pnpm build` in the repository first",
  );
  process.exit(1);
}
await import(cli.href);
