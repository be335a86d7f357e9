// Adds up vitest's "Tests N passed | M failed | K skipped" lines of every package in a turbo log
// and prints one closing line, after the names of what failed (vitest's FAIL lines, its unhandled
// errors, turbo's failed tasks) so that the end of a long log says what to look at. Fails when no
// test ran at all, so an empty run never looks green.
import { readFileSync } from "node:fs";

const [file, statusText] = process.argv.slice(2);
// Colour codes (ESC [ ... m) are dropped before matching.
const text = readFileSync(file, "utf8").replace(
  new RegExp(`${String.fromCharCode(27)}\\[[0-9;]*m`, "g"),
  "",
);
const totals = { passed: 0, failed: 0, skipped: 0 };
let files = 0;
const failures = new Set();
for (const line of text.split("\n")) {
  if (/\sFAIL\s|Unhandled (Error|Rejection)|^\s*Failed:\s/.test(line)) failures.add(line.trim());
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
if (failures.size > 0) {
  const shown = [...failures].slice(0, 40);
  console.log(`\nwhat failed:\n${shown.map((line) => `  ${line}`).join("\n")}`);
  if (failures.size > shown.length) console.log(`  ... and ${failures.size - shown.length} more`);
}
console.log(`\ntests: ${totals.passed} passed, ${totals.failed} failed, ${totals.skipped} skipped`);
if (files === 0 || totals.passed === 0) {
  console.error("test-summary: no test ran");
  process.exit(1);
}
