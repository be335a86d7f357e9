// `leaf store [NAME [VALUE]] [--config FILE]`: the configured segment store's operator commands
// (the Redis store's create-namespace and lift-fence), run with the server's configuration. Without
// NAME it lists them.
import { storeBackend } from "./backends/index";
import { loadConfig } from "./config";

/** Thrown for a command line that cannot run; the CLI prints it with the usage. */
export class StoreCommandError extends Error {}

/** Runs `leaf store ARGS`; answers the exit code. */
export async function storeCommand(args: string[]): Promise<number> {
  let file: string | undefined;
  const rest: string[] = [];
  for (let i = 0; i < args.length; i++) {
    if (args[i] === "--config") {
      file = args[++i];
      if (file === undefined) throw new StoreCommandError("--config needs a value");
    } else rest.push(args[i]!);
  }
  const config = loadConfig({ file: file ?? process.env.LEAF_CONFIG });
  if (!config.segment) {
    throw new StoreCommandError("segment mode is disabled (segment.enabled=false): no store");
  }
  const entry = storeBackend(config.segment.store);
  const operations = entry.operations ?? [];
  const [name, value, ...extra] = rest;
  if (name === undefined) {
    console.log(
      operations.length === 0
        ? `the ${entry.kind} store has no operator commands`
        : `commands of the ${entry.kind} store:\n${operations.map((o) => `  leaf store ${o.usage}\n      ${o.doc}`).join("\n")}`,
    );
    return 0;
  }
  const operation = operations.find((o) => o.name === name);
  if (!operation) {
    throw new StoreCommandError(
      `the ${entry.kind} store has no command ${JSON.stringify(name)}` +
        (operations.length > 0
          ? `; its commands: ${operations.map((o) => o.name).join(", ")}`
          : ""),
    );
  }
  if (extra.length > 0) throw new StoreCommandError(`unexpected arguments: ${extra.join(" ")}`);
  console.log(await operation.run(config.segment.backend, value));
  return 0;
}
