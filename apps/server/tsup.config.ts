// Two builds: the library entry (with types) and the CLI (with its shebang), both ESM for Node 20.
// The monitor page's script (src/browser/) is bundled for browsers into both, as text.
import { defineConfig } from "tsup";
import { browserScriptEsbuildPlugin } from "./build/browser-script.ts";

export default defineConfig([
  {
    entry: ["src/index.ts"],
    format: ["esm"],
    target: "node20",
    // Declarations unless BUILD_DECLARATIONS=0 (see the root tsup.config.ts).
    dts: process.env.BUILD_DECLARATIONS !== "0",
    sourcemap: true,
    clean: true,
    esbuildPlugins: [browserScriptEsbuildPlugin()],
  },
  {
    entry: ["src/cli.ts"],
    format: ["esm"],
    target: "node20",
    sourcemap: true,
    banner: { js: "#!/usr/bin/env node" },
    esbuildPlugins: [browserScriptEsbuildPlugin()],
  },
]);
