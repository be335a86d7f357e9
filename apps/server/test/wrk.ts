// Runs wrk, the outside load generator of the stop tests (installed by scripts/install-services.sh),
// with test/fixtures/wrk-count.lua, which counts every answer by kind.
import { spawn } from "node:child_process";

const SCRIPT = new URL("./fixtures/wrk-count.lua", import.meta.url).pathname;

/** What wrk-count.lua reports. */
export interface WrkResult {
  /** Answers by kind: "id", or "<status> <first line>". */
  answers: Record<string, number>;
  requests: number;
  connect: number;
  read: number;
  write: number;
  timeout: number;
  status: number;
}

/** Runs wrk with 8 connections for `seconds` against `url` and reads the script's RESULT line. */
export function wrk(url: string, seconds: number): Promise<{ result: WrkResult; output: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(
      "wrk",
      ["-t2", "-c8", `-d${seconds}s`, "--timeout", "10s", "-s", SCRIPT, url],
      { stdio: ["ignore", "pipe", "pipe"] },
    );
    let output = "";
    child.stdout.setEncoding("utf8").on("data", (chunk: string) => {
      output += chunk;
    });
    child.stderr.setEncoding("utf8").on("data", (chunk: string) => {
      output += chunk;
    });
    child.once("error", (error) =>
      reject(new Error(`wrk could not run (scripts/install-services.sh installs it): ${error}`)),
    );
    child.once("exit", () => {
      const line = /^RESULT (.*)$/m.exec(output);
      if (line === null) reject(new Error(`wrk printed no result:\n${output}`));
      else resolve({ result: JSON.parse(line[1]!) as WrkResult, output });
    });
  });
}

/** Answers that are neither an id nor the project's SHUTTING_DOWN (as "<kind>", count). */
export function otherAnswers(result: WrkResult): Array<[string, number]> {
  return Object.entries(result.answers).filter(
    ([kind]) =>
      kind !== "id" &&
      !/^503 (Result\{id=-?\d+, status=EXCEPTION\}|SHUTTING_DOWN|\{"status":503,"code":"SHUTTING_DOWN")/.test(
        kind,
      ),
  );
}
