// Adds up vitest's "Tests N passed | M failed | K skipped" lines of every package in a turbo log
// and prints one closing line. Fails when no test ran at all, so an empty run never looks green.
import { readFileSync } from "node:fs";

const [file, statusText] = process.argv.slice(2);
// Colour codes (ESC [ ... m) are dropped before matching.
const text = readFileSync(file, "utf8").replace(
  new RegExp(`${String.fromCharCode(27)}\\[[0-9;]*m`, "g"),
  "",
);
const totals = { passed: 0, failed: 0, skipped: 0 };
let files = 0;
for (const line of text.split("\n")) {
  const match = /\bTests\s+(.+)\(\d+\)\s*$/.exec(line);
  if (!match) continue;
  files++;
  for (const key of Object.keys(totals)) {
    const count = new RegExp(`(\\d+) ${key}`).exec(match[1]);
    if (count) totals[key] += Number(count[1]);
  }
}
const status = Number(statusText);
if (status !== 0 && totals.failed === 0) totals.failed = 1; // a crash or a timeout outside vitest's count
console.log(`\ntests: ${totals.passed} passed, ${totals.failed} failed, ${totals.skipped} skipped`);
if (files === 0 || totals.passed === 0) {
  console.error("test-summary: no test ran");
  process.exit(1);
}
