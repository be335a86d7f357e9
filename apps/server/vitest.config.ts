// The shared settings. The monitor page's script is bundled by src/monitor-script.ts at load, with
// the esbuild the build uses.
import shared from "../../vitest.shared.ts";

export default shared;
