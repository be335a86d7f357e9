// The monitor page's browser script (src/browser/monitor.ts) bundled by esbuild into the text of
// one classic script (an IIFE). src/monitor-script.ts calls monitorScriptFromSource() when the
// server runs from its source (tsx, vitest); the build (tsup) replaces that module with the bundled
// text, so the published package needs no bundler. Both use the esbuild tsup brings.
import { createRequire } from "node:module";
import { resolve } from "node:path";
import { fileURLToPath } from "node:url";
import type { Options } from "tsup";

/** esbuild's plugin and API types, as tsup (which brings esbuild) declares them. */
type EsbuildPlugin = NonNullable<Options["esbuildPlugins"]>[number];
type Esbuild = Parameters<EsbuildPlugin["setup"]>[0]["esbuild"];

/** The browser entry, and the module of the server that stands for its bundled text. */
const BROWSER_ENTRY = fileURLToPath(new URL("../src/browser/monitor.ts", import.meta.url));
const SCRIPT_MODULE = fileURLToPath(new URL("../src/monitor-script.ts", import.meta.url));

/** The browsers the bundled scripts must run in (the page already needs BigInt). */
const BROWSER_TARGET = ["chrome80", "firefox78", "safari14", "edge80"];

/** Bundles one browser entry into the text of a classic script. */
export async function bundleBrowserScript(
  bundler: Esbuild,
  file: string,
): Promise<{ code: string; inputs: string[] }> {
  const result = await bundler.build({
    entryPoints: [file],
    bundle: true,
    write: false,
    format: "iife",
    platform: "browser",
    target: BROWSER_TARGET,
    charset: "utf8",
    legalComments: "none",
    metafile: true,
    logLevel: "silent",
  });
  const code = result.outputFiles[0]?.text;
  if (code === undefined) throw new Error(`[leaf] [build] esbuild gave no output for ${file}`);
  return { code, inputs: Object.keys(result.metafile.inputs).map((input) => resolve(input)) };
}

/** esbuild as tsup brings it (a development dependency of the server). */
function tsupEsbuild(): Esbuild {
  const fromTsup = createRequire(createRequire(import.meta.url).resolve("tsup"));
  return fromTsup("esbuild") as Esbuild;
}

/** The monitor script's text, bundled now: for the server run from its source (tsx, vitest). */
export async function monitorScriptFromSource(): Promise<string> {
  return (await bundleBrowserScript(tsupEsbuild(), BROWSER_ENTRY)).code;
}

/** For tsup: src/monitor-script.ts becomes the bundled text, as a constant. */
export function browserScriptEsbuildPlugin(): EsbuildPlugin {
  return {
    name: "leaf-browser-script",
    setup(build) {
      build.onLoad({ filter: /monitor-script\.ts$/ }, async (args) => {
        if (resolve(args.path) !== SCRIPT_MODULE) return undefined;
        const { code, inputs } = await bundleBrowserScript(build.esbuild, BROWSER_ENTRY);
        return {
          contents: `export const MONITOR_SCRIPT = ${JSON.stringify(code)};`,
          loader: "js",
          watchFiles: inputs,
        };
      });
    },
  };
}
