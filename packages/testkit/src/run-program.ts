// Runs a short-lived program to completion (mariadb-install-db), output collected for error
// messages.
import { spawn } from "node:child_process";
import { forgetPid, watchPid } from "./cleanup";

/** How a program ended, with stdout and stderr interleaved. */
export interface ProgramResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  output: string;
}

/** Runs `file` with `args`; the watchdog kills it if this process dies first. */
export function runProgram(file: string, args: string[]): Promise<ProgramResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(file, args, { stdio: ["ignore", "pipe", "pipe"] });
    let output = "";
    child.stdout.setEncoding("utf8").on("data", (chunk: string) => {
      output += chunk;
    });
    child.stderr.setEncoding("utf8").on("data", (chunk: string) => {
      output += chunk;
    });
    child.once("spawn", () => watchPid(child.pid!));
    child.once("error", reject);
    child.once("close", (code, signal) => {
      if (child.pid !== undefined) forgetPid(child.pid);
      resolve({ code, signal, output });
    });
  });
}
