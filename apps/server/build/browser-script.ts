// Browser scripts imported as text: `import source from "./browser/x.ts?script"` gives the module
// bundled by esbuild into one classic script (an IIFE). The build (tsup) and the tests (vitest) use
// the same esbuild, so that the tests drive the script that ships.
import { createRequire } from "node:module";
import { relative, resolve } from "node:path";
import type { Options } from "tsup";

/** esbuild's plugin and API types, as tsup (which brings esbuild) declares them. */
type EsbuildPlugin = NonNullable<Options["esbuildPlugins"]>[number];
type Esbuild = Parameters<EsbuildPlugin["setup"]>[0]["esbuild"];

const SUFFIX = "?script";

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

/** The `?script` import for tsup (esbuild). */
export function browserScriptEsbuildPlugin(): EsbuildPlugin {
  return {
    name: "leaf-browser-script",
    setup(build) {
      // The path relative to the package, so that no build machine's folder lands in the bundle.
      build.onResolve({ filter: /\?script$/ }, (args) => {
        const file = resolve(args.resolveDir, args.path.slice(0, -SUFFIX.length));
        return {
          path: relative(process.cwd(), file),
          namespace: "browser-script",
          pluginData: file,
        };
      });
      build.onLoad({ filter: /.*/, namespace: "browser-script" }, async (args) => {
        const { code, inputs } = await bundleBrowserScript(
          build.esbuild,
          args.pluginData as string,
        );
        return {
          contents: `export default ${JSON.stringify(code)};`,
          loader: "js",
          watchFiles: inputs,
        };
      });
    },
  };
}

/**
 * The `?script` import for vitest (vite). esbuild is the one tsup builds with: resolved through
 * tsup, so that the tests bundle the script exactly as the build does.
 */
export function browserScriptVitePlugin() {
  const fromTsup = createRequire(createRequire(import.meta.url).resolve("tsup"));
  const bundler = fromTsup("esbuild") as Esbuild;
  return {
    name: "leaf-browser-script",
    enforce: "pre" as const,
    async load(this: { addWatchFile(file: string): void }, id: string) {
      if (!id.endsWith(SUFFIX)) return null;
      const { code, inputs } = await bundleBrowserScript(bundler, id.slice(0, -SUFFIX.length));
      for (const input of inputs) this.addWatchFile(input);
      return `export default ${JSON.stringify(code)};`;
    },
  };
}
