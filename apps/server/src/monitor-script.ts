// The monitor page's browser script (browser/monitor.ts: typed, linted) as the text of one classic
// script. Run from source (tsx, vitest) it is bundled here at load; the build replaces this module
// with the bundled text (build/browser-script.ts), so the published server bundles nothing.
import { monitorScriptFromSource } from "../build/browser-script";

/** The bundled script, inlined into the monitor page. */
export const MONITOR_SCRIPT: string = await monitorScriptFromSource();
