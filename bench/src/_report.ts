// Shared by every bench: prints a table and writes bench/results/NAME.json shaped
// {"rows":[{"name":"...","idsPerSecond":...}]}, figures in camelCase with the unit in the name.
import { mkdirSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

/** One measured system or path. */
export type BenchRow = { name: string } & Record<string, string | number | boolean | null>;

const resultsDir = join(dirname(fileURLToPath(import.meta.url)), "..", "results");

/** Prints `rows` as a table (with an optional note under it) and writes results/NAME.json. */
export function report(bench: string, rows: BenchRow[], note?: string): void {
  const columns = [...new Set(rows.flatMap((row) => Object.keys(row)))];
  const cells = rows.map((row) => columns.map((c) => format(row[c])));
  const widths = columns.map((c, i) => Math.max(c.length, ...cells.map((r) => r[i]!.length)));
  const line = (values: string[]) =>
    `| ${values.map((v, i) => (i === 0 ? v.padEnd(widths[i]!) : v.padStart(widths[i]!))).join(" | ")} |`;
  console.log(`\n${bench}`);
  console.log(line(columns));
  console.log(
    `|${widths.map((w, i) => (i === 0 ? `:${"-".repeat(w + 1)}` : `${"-".repeat(w + 1)}:`)).join("|")}|`,
  );
  for (const row of cells) console.log(line(row));
  if (note) console.log(`\n${note}`);
  mkdirSync(resultsDir, { recursive: true });
  const file = join(resultsDir, `${bench}.json`);
  writeFileSync(file, `${JSON.stringify({ rows }, null, 2)}\n`);
  console.log(`\nwrote ${file}`);
}

function format(value: unknown): string {
  if (value === undefined || value === null) return "";
  if (typeof value === "number") {
    return Number.isInteger(value) ? value.toLocaleString("en-US") : value.toFixed(2);
  }
  return String(value);
}
