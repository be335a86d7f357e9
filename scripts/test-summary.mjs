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
// What vitest printed under each failed test (the error, the expected and received values, where),
// up to its separator line: a CI log cut to its end still says why, not only what.
const details = new Map();
const lines = text.split("\n");
/**
 * The lines vitest printed below `lines[index]` within `span` (the lane's `pkg:test: ` prefix
 * taken off) up to one that `stop` matches, those that `keep` matches, at most `max`.
 */
function below(index, { span, stop, keep, max }) {
  const prefix = /^(\S+:test: )?/.exec(lines[index])[0];
  const kept = [];
  for (const next of lines.slice(index + 1, index + span)) {
    const bare = next.startsWith(prefix) ? next.slice(prefix.length) : next;
    if (stop.test(bare) || kept.length >= max) break;
    if (keep.test(bare)) kept.push(bare.trimEnd());
  }
  return kept;
}
for (const [index, line] of lines.entries()) {
  if (/\sFAIL\s|Unhandled (Error|Rejection)|^\s*Failed:\s/.test(line)) failures.add(line.trim());
  if (details.has(line.trim())) {
    // described once
  } else if (/\sFAIL\s/.test(line)) {
    details.set(
      line.trim(),
      below(index, { span: 40, stop: /⎯{3}|\sFAIL\s/, keep: /\S/, max: 14 }),
    );
  } else if (/Unhandled (Error|Rejection)/.test(line)) {
    // The error's first line and which file and test vitest blames (the CI of 96df4ee printed
    // only the header, so its cause had to be found again).
    const blamed = below(index, {
      span: 60,
      stop: /Unhandled (Error|Rejection)|Test Files/,
      keep: /^\s*\w*Error\b|originated in|latest test/,
      max: 6,
    });
    details.set(
      line.trim(),
      blamed.map((l) => l.trim()),
    );
  }
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
  const withDetails = shown.map((line) =>
    [`  ${line}`, ...(details.get(line) ?? []).map((below) => `      ${below}`)].join("\n"),
  );
  console.log(`\nwhat failed:\n${withDetails.join("\n")}`);
  if (failures.size > shown.length) console.log(`  ... and ${failures.size - shown.length} more`);
}
console.log(`\ntests: ${totals.passed} passed, ${totals.failed} failed, ${totals.skipped} skipped`);
if (files === 0 || totals.passed === 0) {
  console.error("test-summary: no test ran");
  process.exit(1);
}
