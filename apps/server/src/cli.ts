// The command line: `leaf-server [--config FILE]` runs the service (SIGTERM/SIGINT stop it
// gracefully), `leaf decode ID [--epoch MS] [--layout NAME] [--json]` takes an id apart.

import cluster from "node:cluster";
import { defineLayout, isLeafError, type Layout, layouts } from "@leaf/core";
import { SequenceIdFormat } from "@leaf/redis-sequence";
import { storeBackend } from "./backends/index";
import { formResidueSetCommand } from "./backends/residue-store";
import { servePrimary } from "./cluster-primary";
import { serveWorker } from "./cluster-worker";
import { loadConfig, type ServerConfig } from "./config";
import { envName } from "./config-keys";
import { MAX_WORKERS, workerCount } from "./config-readers";
import { DECODE_LAYOUTS, type DecodeLayoutName, decodeId } from "./decode";
import { decodeInput, ID_FORMATS } from "./id-formats";
import { type LeafServer, startServer, VERSION } from "./server";
import { StoreCommandError, storeCommand } from "./store-commands";

const USAGE = `Usage:
  leaf-server [--config FILE] [--workers N|auto] [--check]   run the Leaf id service
  leaf decode ID [--epoch MS] [--layout NAME] [--format F [--prefix P]] [--time-zone TZ]
                 [--config FILE] [--json]  take an id apart
  leaf store [NAME [VALUE]] [--config FILE]   the segment store's operator commands
                 (the Redis store: create-namespace, lift-fence RAISE_BY); without NAME: the list
  leaf-server --form-residue-set [--config FILE]   form segment.store=residue's set of
                 databases, or add the new ones listed (N to N+1); prints what it did
  leaf-server --help | --version

The configuration comes from FILE (leaf.properties, .json, .yaml or .yml; also LEAF_CONFIG),
then from LEAF_* environment variables, which win. Without any, the server starts on
127.0.0.1:8080 with the embedded segment store in ./.leaf-data and the local registry.
--workers N: N worker processes serve the port, each with its own worker id and ranges
(server.workers; auto: one per core; default 1). --check validates the configuration and exits.
Layouts for decode: ${DECODE_LAYOUTS.join(", ")} (default leaf; --epoch overrides its epoch).
--format: the string form ID is in, as the JSON API writes it for the layout: ${ID_FORMATS.join(", ")}
(default decimal); --prefix: the prefix written before it (e.g. ord_).
--time-zone: the zone a redis-sequence string id was made in ("UTC", "+08:00", "Asia/Shanghai");
default redisSequence.timeZone from --config FILE or LEAF_REDIS_SEQUENCE_TIME_ZONE, else UTC.`;

/** Thrown for bad command-line arguments: printed with the usage, exit code 2. */
class UsageError extends Error {}

function takeValue(args: string[], i: number, flag: string): string {
  const value = args[i + 1];
  if (value === undefined || value.startsWith("--")) throw new UsageError(`${flag} needs a value`);
  return value;
}

async function main(argv: string[]): Promise<number> {
  const args = argv.slice(2);
  if (args.includes("--help") || args.includes("-h")) {
    console.log(USAGE);
    return 0;
  }
  if (args.includes("--version")) {
    console.log(VERSION);
    return 0;
  }
  if (args[0] === "decode") return decode(args.slice(1));
  if (args[0] === "store") {
    return storeCommand(args.slice(1)).catch((error: unknown) => {
      throw error instanceof StoreCommandError ? new UsageError(error.message) : error;
    });
  }
  if (args[0] === "serve") args.shift();
  return serve(args);
}

function decode(args: string[]): number {
  let id: string | undefined;
  let epoch: number | undefined;
  let layoutName: DecodeLayoutName = "leaf";
  let json = false;
  let timeZone: string | undefined;
  let configFile: string | undefined;
  const form: { format?: string; prefix?: string } = {};
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!;
    if (arg === "--format") {
      const raw = takeValue(args, i++, "--format");
      if (!(ID_FORMATS as readonly string[]).includes(raw)) {
        throw new UsageError(`--format must be one of ${ID_FORMATS.join(", ")}, got "${raw}"`);
      }
      form.format = raw;
    } else if (arg === "--prefix") form.prefix = takeValue(args, i++, "--prefix");
    else if (arg === "--epoch") {
      const raw = takeValue(args, i++, "--epoch");
      if (!/^[0-9]{1,16}$/.test(raw))
        throw new UsageError(`--epoch must be ms since 1970 (digits), got "${raw}"`);
      epoch = Number(raw);
    } else if (arg === "--layout") {
      const raw = takeValue(args, i++, "--layout");
      if (!(DECODE_LAYOUTS as readonly string[]).includes(raw)) {
        throw new UsageError(`--layout must be one of ${DECODE_LAYOUTS.join(", ")}, got "${raw}"`);
      }
      layoutName = raw as DecodeLayoutName;
    } else if (arg === "--time-zone") timeZone = takeValue(args, i++, "--time-zone");
    else if (arg === "--config" || arg === "-c") configFile = takeValue(args, i++, arg);
    else if (arg === "--json") json = true;
    else if (arg.startsWith("--")) throw new UsageError(`unknown option ${arg}`);
    else if (id === undefined) id = arg;
    else throw new UsageError(`one id at a time (got "${id}" and "${arg}")`);
  }
  if (id === undefined) throw new UsageError("decode needs an ID");
  if (layoutName === "snowflake") layoutName = "leaf";
  let layout: Layout =
    layoutName === "redis-sequence" ? layouts.redisSequence : layouts[layoutName];
  if (epoch !== undefined) {
    if (layoutName === "redis-sequence")
      throw new UsageError("--epoch applies to snowflake layouts, not redis-sequence");
    layout = defineLayout({ ...layout, epoch, name: `${layout.name} (epoch ${epoch})` });
  }
  if (timeZone !== undefined && layoutName !== "redis-sequence") {
    throw new UsageError("--time-zone applies to redis-sequence ids (--layout redis-sequence)");
  }
  const format =
    layoutName === "redis-sequence"
      ? sequenceFormat(timeZone ?? configuredTimeZone(configFile), timeZone !== undefined)
      : undefined;
  const decodeAs = epoch !== undefined ? "snowflake" : layoutName;
  const answer = decodeId(decodeInput(id, form, decodeAs, layout), decodeAs, layout, format);
  if (json) {
    console.log(JSON.stringify(answer, null, 2));
    return 0;
  }
  const rows: [string, string][] = [
    ["id", form.format === undefined ? answer.id : `${answer.id} (${form.format} ${id})`],
    [
      "layout",
      `${answer.layout} (${answer.bits.timestamp}/${answer.bits.worker}/${answer.bits.sequence} bits, ` +
        `epoch ${answer.epoch} = ${new Date(answer.epoch).toISOString()})`,
    ],
    ["time", `${answer.time} (${answer.timestampMs} ms)`],
    [answer.shard !== undefined ? "shard" : "worker id", String(answer.workerId)],
    ["sequence", String(answer.sequence)],
  ];
  if (answer.stringForm !== undefined) {
    rows.push(["string form", `${answer.stringForm} (time zone ${answer.timeZone})`]);
  }
  for (const [k, v] of rows) console.log(`${k.padEnd(12)}${v}`);
  return 0;
}

/**
 * The redis sequence's time zone as the server would use it: redisSequence.timeZone from the
 * configuration file (--config, or LEAF_CONFIG) and LEAF_* variables; UTC when none says.
 */
function configuredTimeZone(file: string | undefined): string {
  const zoneVariable = process.env.LEAF_REDIS_SEQUENCE_TIME_ZONE;
  file ??= process.env.LEAF_CONFIG || undefined;
  if (file === undefined && !zoneVariable) return "UTC";
  const config = loadConfig({ file });
  return config.redisSequence?.timeZone ?? zoneVariable ?? "UTC";
}

function sequenceFormat(timeZone: string, fromFlag: boolean): SequenceIdFormat {
  try {
    return new SequenceIdFormat({ timeZone });
  } catch (error) {
    if (!fromFlag) throw error;
    throw new UsageError(
      `--time-zone must be "UTC", an offset such as "+08:00" or a zone such as "Asia/Shanghai" with a fixed offset, got "${timeZone}"`,
    );
  }
}

async function serve(args: string[]): Promise<number> {
  let file = process.env.LEAF_CONFIG || undefined;
  let check = false;
  let formSet = false;
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!;
    if (arg === "--config" || arg === "-c") file = takeValue(args, i++, arg);
    else if (arg.startsWith("--config=")) file = arg.slice("--config=".length);
    else if (arg === "--check") check = true;
    else if (arg === "--form-residue-set") formSet = true;
    else if (arg === "--workers" || arg.startsWith("--workers=")) {
      const raw = arg === "--workers" ? takeValue(args, i++, arg) : arg.slice("--workers=".length);
      try {
        workerCount(raw);
      } catch {
        throw new UsageError(
          `--workers must be an integer from 1 to ${MAX_WORKERS}, or auto (one per core), got "${raw}"`,
        );
      }
      // Over the file and the environment; the worker processes inherit it.
      process.env[envName("server.workers")] = raw;
    } else throw new UsageError(`unknown argument ${arg}`);
  }
  const config = loadConfig({ file });
  if (formSet) return formResidueSetCommand(config);
  // A worker process of a server with several: started by the primary, with the same arguments.
  if (cluster.isWorker) return serveWorker(config);
  for (const warning of config.warnings) console.error(`[leaf] [server] warning: ${warning}`);
  if (check) {
    if (config.unknownVariables.length > 0) {
      console.error(
        `leaf: ${config.unknownVariables.length} LEAF_* variable(s) that no key reads: ${config.unknownVariables
          .map((v) => (v.suggestion ? `${v.name} (did you mean ${v.suggestion}?)` : v.name))
          .join(", ")}; fix or unset them (the server ignores them)`,
      );
      return 1;
    }
    console.log(`configuration OK (${config.sources.join(", ") || "defaults"})`);
    return 0;
  }
  if (config.server.workers > 1) {
    return servePrimary(config, (started) => {
      const ids = started.workers.map((w) => w.workerId);
      printWelcome({
        url: started.url,
        config,
        tags: [...new Set(started.workers.flatMap((w) => w.tags))],
        workerIds: ids.every((id) => id === undefined) ? [] : ids,
        workers: started.workers.length,
      });
    });
  }
  // A signal during start is kept and acted on once the start has finished (or failed).
  let early: NodeJS.Signals | undefined;
  const onEarly = (signal: NodeJS.Signals) => {
    early ??= signal;
  };
  process.on("SIGTERM", onEarly).on("SIGINT", onEarly);
  let server: LeafServer;
  try {
    server = await startServer(config);
  } finally {
    process.off("SIGTERM", onEarly).off("SIGINT", onEarly);
  }
  if (early === undefined) {
    const workerId = server.services.snowflake?.worker.lease?.workerId;
    printWelcome({
      url: server.url,
      config: server.context.config,
      tags: server.services.segment?.generator.tags() ?? [],
      workerIds: workerId === undefined ? [] : [workerId],
      workers: 1,
    });
  }
  return new Promise<number>((resolve) => {
    let stopping = false;
    const stop = (signal: NodeJS.Signals) => {
      if (stopping) {
        // A second Ctrl-C means "now": the lease is not released (it expires or is re-checked on
        // the next start). A repeated SIGTERM changes nothing.
        if (signal === "SIGINT") {
          console.error("leaf: second Ctrl-C: exiting without finishing the shutdown");
          process.exit(130);
        }
        return;
      }
      stopping = true;
      // SIGTERM comes from an orchestrator: drain first (server.drainMs). Ctrl-C is a person at a
      // terminal who wants the prompt back: no drain, in-flight requests still finish.
      const drainMs = signal === "SIGINT" ? 0 : server.context.config.server.drainMs;
      server.app.log.info(
        { signal, drainMs },
        drainMs > 0
          ? `${signal}: not ready any more; answering for ${drainMs} ms (server.drainMs), then finishing in-flight requests and releasing the lease`
          : `${signal}: finishing in-flight requests, then releasing the lease`,
      );
      server.close({ drainMs }).then(
        () => {
          server.app.log.info("stopped");
          resolve(0);
        },
        (error: unknown) => {
          server.app.log.error({ err: error }, "shutdown failed");
          resolve(1);
        },
      );
    };
    process.on("SIGTERM", stop);
    process.on("SIGINT", stop);
    if (early !== undefined) stop(early);
  });
}

/** What the start banner shows. */
interface Welcome {
  url: string;
  config: ServerConfig;
  /** Segment tags served. */
  tags: string[];
  /** Snowflake worker ids held, one per worker process. */
  workerIds: Array<number | undefined>;
  workers: number;
}

function printWelcome({ url, config, tags, workerIds, workers }: Welcome): void {
  const lines = [
    `Leaf ${VERSION} is running on ${url}`,
    `  listening on   ${config.server.host}: ${config.server.hostReason}`,
  ];
  if (workers > 1) {
    lines.push(
      `  workers        ${workers} processes share the port (server.workers), each with its own ids`,
    );
  }
  if (config.segment) {
    const store = storeBackend(config.segment.store).describe(config.segment.backend);
    if (!store.shared) {
      lines.push(
        `  segment store  ${store.kind} in ${store.target}: single node (no other node may serve these tags)`,
      );
    }
  }
  lines.push("");
  if (config.segment) {
    // The demo tag is created in the embedded store only (a MySQL store serves the tags it holds),
    // and not again once an operator deleted it: the banner names a tag that is served.
    const served = tags;
    const backend = config.segment.backend;
    const demoTag = backend.kind === "embedded" ? backend.demoTag : null;
    const tag = (demoTag !== null && served.includes(demoTag) ? demoTag : served[0]) ?? "TAG";
    lines.push(`  segment id     ${url}/api/segment/get/${encodeURIComponent(tag)}`);
    lines.push(`  100 ids        ${url}/api/segment/get/${encodeURIComponent(tag)}?count=100`);
  }
  if (config.snowflake) {
    const held =
      workerIds.length > 1 ? `worker ids ${workerIds.join(", ")}` : `worker id ${workerIds[0]}`;
    lines.push(`  snowflake id   ${url}/api/snowflake/get/test   (${held})`);
    lines.push(`  decode         ${url}/decodeSnowflakeId?snowflakeId=ID`);
  }
  if (config.redisSequence) lines.push(`  redis sequence ${url}/api/v1/redis-sequence/id?shard=0`);
  lines.push(`  monitor        ${url}/monitor`);
  lines.push(`  readiness      ${url}/health/ready`);
  lines.push(`  metrics        ${url}/metrics`);
  lines.push(`  API document   ${url}/openapi.json`);
  lines.push(
    "",
    "Stop with Ctrl-C (or SIGTERM): in-flight requests finish and the lease is released.",
  );
  console.log(lines.join("\n"));
}

main(process.argv).then(
  (code) => process.exit(code),
  (error: unknown) => {
    if (error instanceof UsageError) {
      console.error(`leaf: ${error.message}\n\n${USAGE}`);
      process.exit(2);
    }
    // The code first, so that scripts and operators can tell CLOCK_BEHIND_LEASE from CLOCK_SKEW.
    if (isLeafError(error)) console.error(`${error.code}: ${error.message}`);
    // The server's own start errors (port in use, ...) already say what to do: no stack trace.
    else if (error instanceof Error && error.message.startsWith("[leaf] ")) {
      console.error(
        `${error.message}${error.cause instanceof Error ? ` (${error.cause.message})` : ""}`,
      );
    } else console.error(error);
    process.exit(1);
  },
);
