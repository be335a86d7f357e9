// `pnpm test:nemesis [--seed N] [--minutes M] [--only FAMILY,...]`: random, combined faults against
// each family's cluster under load, the history checked. Exit code 1 when a family broke a promise.
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { stopAll } from "@leaf/testkit";
import { FAMILIES, selectFamilies } from "./families";
import { runNemesis } from "./nemesis";
import type { Schedule } from "./schedule";

const USAGE = `Usage: test:nemesis [--seed N] [--minutes M] [--only FAMILY,...] [--exclude FAULT,...]
                    [--shrink-runs N] [--schedule FILE] [--results DIR]
  --seed N         the seed of every family's schedule (default: drawn, and printed)
  --minutes M      total length, shared equally by the families run (default 10)
  --only           families: ${FAMILIES.map((f) => f.name).join(", ")}
  --exclude        faults not to draw
  --shrink-runs N  most runs spent shrinking a failing schedule (default 12; 0: none)
  --schedule FILE  replay a schedule written by a failing run
Set LEAF_CHAOS_KEEP=1 to keep each run folder (configs, data, server logs).`;

function parse(argv: string[]) {
  let seed: number | undefined;
  let minutes = 10;
  let only: string[] | undefined;
  let exclude: string[] = [];
  let shrinkRuns = 12;
  let schedule: Schedule | undefined;
  let results = fileURLToPath(new URL("../../results", import.meta.url));
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    const value = () => {
      const v = argv[++i];
      if (v === undefined) throw new Error(`${arg} needs a value\n\n${USAGE}`);
      return v;
    };
    const whole = (text: string, min: number) => {
      const n = Number(text);
      if (!/^[0-9]+$/.test(text) || n < min || !Number.isSafeInteger(n)) {
        throw new Error(`${arg} must be a whole number of at least ${min}, got ${text}`);
      }
      return n;
    };
    if (arg === "--") continue;
    if (arg === "--seed") seed = whole(value(), 0);
    else if (arg === "--minutes") {
      const text = value();
      minutes = Number(text);
      if (!Number.isFinite(minutes) || minutes <= 0) {
        throw new Error(`--minutes must be a number of minutes above 0, got ${text}`);
      }
    } else if (arg === "--only") only = value().split(",").filter(Boolean);
    else if (arg === "--exclude") exclude = value().split(",").filter(Boolean);
    else if (arg === "--shrink-runs") shrinkRuns = whole(value(), 0);
    else if (arg === "--schedule") schedule = JSON.parse(readFileSync(value(), "utf8")) as Schedule;
    else if (arg === "--results") results = value();
    else if (arg === "--help" || arg === "-h") {
      console.log(USAGE);
      process.exit(0);
    } else throw new Error(`unknown argument ${arg}\n\n${USAGE}`);
  }
  return { seed, minutes, only, exclude, shrinkRuns, schedule, results };
}

async function main(): Promise<number> {
  const args = parse(process.argv.slice(2));
  const families = args.schedule
    ? selectFamilies([args.schedule.family])
    : selectFamilies(args.only);
  const seed = args.schedule?.seed ?? args.seed ?? Math.floor(Math.random() * 1_000_000);
  const familyMs = Math.round((args.minutes * 60_000) / families.length);
  console.log(
    `nemesis: seed ${seed}, ${families.length} famil${families.length === 1 ? "y" : "ies"}, ${(familyMs / 1000).toFixed(0)} s each`,
  );
  try {
    const result = await runNemesis({
      families,
      seed,
      familyMs,
      exclude: args.exclude,
      shrinkRuns: args.shrinkRuns,
      resultsDir: args.results,
      schedule: args.schedule,
      log: (line) => console.log(line),
    });
    return result.failed === 0 ? 0 : 1;
  } finally {
    await stopAll();
  }
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    console.error(error instanceof Error ? error.message : error);
    process.exit(2);
  },
);
