// The shared settings, plus the `?script` import of the monitor page's browser script, bundled as
// the build bundles it.
import { mergeConfig } from "vitest/config";
import shared from "../../vitest.shared.ts";
import { browserScriptVitePlugin } from "./build/browser-script.ts";

export default mergeConfig(shared, { plugins: [browserScriptVitePlugin()] });
