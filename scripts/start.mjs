// `pnpm start`: builds the server and what it depends on (turbo, cached), then runs the server in
// this same process, so that a SIGTERM or Ctrl-C that reaches `pnpm start` reaches the server:
// there is no shell or second process in between to leave it running as an orphan.
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";

const root = fileURLToPath(new URL("..", import.meta.url));
const build = spawnSync(
  "pnpm",
  ["exec", "turbo", "run", "build", "--filter=@leaf/server...", "--output-logs=errors-only"],
  { cwd: root, stdio: "inherit" },
);
if (build.status !== 0) {
  console.error(`leaf: the build failed (exit ${build.status ?? build.signal}); not starting`);
  process.exit(build.status ?? 1);
}
// pnpm does not pass a SIGTERM on to the script it runs: it exits, and this process would go on as
// an orphan holding the port and the worker id. So losing the parent counts as a SIGTERM: the
// server drains and stops as it would on the signal itself.
const parent = process.ppid;
const watch = setInterval(() => {
  if (process.ppid === parent) return;
  clearInterval(watch);
  process.kill(process.pid, "SIGTERM");
}, 200).unref();
// The CLI reads its arguments from process.argv: `pnpm start --config leaf.properties` passes them
// on.
await import(new URL("../apps/server/dist/cli.js", import.meta.url).href);
