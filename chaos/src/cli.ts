// `pnpm test:chaos` (= `pnpm --filter @leaf/chaos chaos`): the full form, every scenario with
// 10 million ids in all. `--short` runs the CI subset; `--only a,b` some scenarios; `--ids N`.
import { fileURLToPath } from "node:url";
import { stopAll } from "@leaf/testkit";
import { runChaos } from "./runner";

const USAGE = `Usage: chaos [--short] [--ids N] [--only NAME,NAME...] [--results DIR]
  --short   the short form (one scenario of each kind, as CI runs it)
  --ids N   ids to issue over the whole run (default 10,000,000; short form 120,000)
  --only    run only the named scenarios
  --results folder of REPORT.json (default chaos/results)
Set LEAF_CHAOS_KEEP=1 to keep the run folder (configs, data, server logs).`;

function parse(argv: string[]) {
  let form: "short" | "full" = "full";
  let ids: number | undefined;
  let only: string[] | undefined;
  let results = fileURLToPath(new URL("../results", import.meta.url));
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    const value = () => {
      const v = argv[++i];
      if (v === undefined) throw new Error(`${arg} needs a value\n\n${USAGE}`);
      return v;
    };
    // A lone "--" (what `pnpm run x -- args` passes on) separates nothing here.
    if (arg === "--") continue;
    if (arg === "--short") form = "short";
    else if (arg === "--ids") {
      const raw = value().replace(/[_,]/g, "");
      ids = Number(raw);
      if (!/^[0-9]+$/.test(raw) || ids < 1000)
        throw new Error(`--ids must be a whole number of at least 1000, got ${raw}`);
    } else if (arg === "--only") only = value().split(",").filter(Boolean);
    else if (arg === "--results") results = value();
    else if (arg === "--help" || arg === "-h") {
      console.log(USAGE);
      process.exit(0);
    } else throw new Error(`unknown argument ${arg}\n\n${USAGE}`);
  }
  return { form, ids: ids ?? (form === "full" ? 10_000_000 : 120_000), only, results };
}

async function main(): Promise<number> {
  const args = parse(process.argv.slice(2));
  const command = ["pnpm test:chaos", ...process.argv.slice(2)].join(" ");
  try {
    const report = await runChaos({
      form: args.form,
      totalIds: args.ids,
      only: args.only,
      resultsDir: args.results,
      command,
    });
    return report.failed === 0 && report.notRun === 0 && report.duplicates === 0 ? 0 : 1;
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
