// The build of every package under packages/ (each package's `build` script names its entries and
// formats; tsup finds this file by searching up from the package). Declaration files are built
// unless BUILD_DECLARATIONS=0: `pnpm test` builds without them (the tests run the JavaScript, and
// the declarations took about 80 of the build's 100 s on a 2-core machine); `pnpm build`,
// `pnpm typecheck` and `pnpm lint` build them.
import { defineConfig } from "tsup";

export default defineConfig({ dts: process.env.BUILD_DECLARATIONS !== "0" });
