// What each layout trades, computed from its bits: workers, ids per second per worker, years, the
// run-out date, and whether its ids fit a JS number. The README's layout table is this output.
import type { Layout } from "./layout";

const YEAR_MS = 365.2425 * 24 * 3600 * 1000;

/** The trade-offs of one layout, as numbers and as the README shows them. */
export interface LayoutFacts {
  /** The name it is known by (the `layouts` key, e.g. "safe53ms"). */
  preset: string;
  timestampBits: number;
  workerBits: number;
  sequenceBits: number;
  unitMillis: number;
  /** Worker ids (2^workerBits). */
  workers: number;
  idsPerSecondPerWorker: number;
  /** Years from the epoch to the last instant. */
  years: number;
  /** The layout's epoch, `YYYY-MM-DD` (UTC). */
  epochDate: string;
  /** The day of the layout's last instant, `YYYY-MM-DD` (UTC): no id after it. */
  runsOut: string;
  /** Every id is at most 2^53 - 1. */
  fitsNumber: boolean;
}

/** The facts of `layout`, known as `preset`. */
export function layoutFacts(preset: string, layout: Layout): LayoutFacts {
  return {
    preset,
    timestampBits: layout.timestampBits,
    workerBits: layout.workerBits,
    sequenceBits: layout.sequenceBits,
    unitMillis: layout.unitMillis,
    workers: layout.maxWorkerId + 1,
    idsPerSecondPerWorker: layout.idsPerSecondPerWorker,
    years: ((layout.maxTicks + 1) * layout.unitMillis) / YEAR_MS,
    epochDate: new Date(layout.epoch).toISOString().slice(0, 10),
    runsOut: new Date(layout.lastInstantMs).toISOString().slice(0, 10),
    fitsNumber: layout.fitsNumber,
  };
}

/**
 * A Markdown table of the layouts' trade-offs, one row per entry in the order given, aligned as a
 * formatter would. `now` (ms) marks a layout that has already run out.
 */
export function layoutTable(entries: Record<string, Layout>, now: number = Date.now()): string {
  const header = [
    "preset",
    "bits (time/worker/sequence)",
    "unit",
    "workers",
    "ids/s per worker",
    "years",
    "epoch",
    "runs out",
    "fits a JS number",
  ];
  const rows = Object.entries(entries).map(([name, layout]) => {
    const f = layoutFacts(name, layout);
    return [
      `\`layouts.${name}\``,
      `${f.timestampBits} / ${f.workerBits} / ${f.sequenceBits}`,
      unitText(f.unitMillis),
      f.workers.toLocaleString("en-US"),
      f.idsPerSecondPerWorker.toLocaleString("en-US"),
      f.years.toFixed(1),
      f.epochDate,
      layout.lastInstantMs < now ? `${f.runsOut} (already)` : f.runsOut,
      f.fitsNumber ? "yes" : "no",
    ];
  });
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: string[]) => `| ${cells.map((c, i) => c.padEnd(widths[i]!)).join(" | ")} |`;
  return [
    line(header),
    `| ${widths.map((w) => "-".repeat(w)).join(" | ")} |`,
    ...rows.map(line),
  ].join("\n");
}

function unitText(unitMillis: number): string {
  if (unitMillis % 1000 === 0) return `${unitMillis / 1000} s`;
  return `${unitMillis} ms`;
}
