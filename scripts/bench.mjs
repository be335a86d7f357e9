// `pnpm bench NAME`: builds what the bench needs, then runs bench/src/NAME.ts, which prints a table
// and writes bench/results/NAME.json.
import { spawnSync } from "node:child_process";
import { existsSync, readdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const name = process.argv[2];
const available = readdirSync(join(root, "bench/src"))
  .filter((f) => f.endsWith(".ts") && !f.endsWith(".d.ts") && !f.startsWith("_"))
  .map((f) => f.slice(0, -3));
if (!name || !available.includes(name)) {
  console.error(
    `usage: pnpm bench NAME, where NAME is one of: ${available.join(", ")}` +
      (name ? ` (got "${name}")` : ""),
  );
  process.exit(2);
}
const run = (cmd, args) => {
  const r = spawnSync(cmd, args, { cwd: root, stdio: "inherit" });
  if (r.status !== 0) process.exit(r.status ?? 1);
};
run("pnpm", [
  "exec",
  "turbo",
  "run",
  "build",
  "--filter=@leaf/bench^...",
  "--output-logs=errors-only",
]);
const script = join(root, "bench/src", `${name}.ts`);
if (!existsSync(script)) process.exit(2);
run(process.execPath, ["--import", "tsx", "--expose-gc", script, ...process.argv.slice(3)]);
