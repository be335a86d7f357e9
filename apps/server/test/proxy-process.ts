// A proxy in front of test servers (HAProxy, nginx; scripts/install-services.sh installs both), run
// in the foreground with its output kept for a failing test's message.
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";

/** Starts `name` (from /usr/sbin when it is there) with `args`; `stop` kills it. */
export function startProxy(name: string, args: string[]) {
  const binary = existsSync(`/usr/sbin/${name}`) ? `/usr/sbin/${name}` : name;
  const child = spawn(binary, args, { stdio: ["ignore", "pipe", "pipe"] });
  let output = "";
  const keep = (chunk: string) => {
    output += chunk;
  };
  child.stdout.setEncoding("utf8").on("data", keep);
  child.stderr.setEncoding("utf8").on("data", keep);
  child.once("error", (error) => {
    output += `${name} could not run (scripts/install-services.sh installs it): ${error}`;
  });
  return { child, output: () => output, stop: () => child.kill("SIGKILL") };
}
