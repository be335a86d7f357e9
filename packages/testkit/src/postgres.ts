// Private PostgreSQL servers (Debian's postgresql package). initdb runs once per machine into a
// template folder that each instance copies. PostgreSQL refuses to run as root, so when the tests
// run as root every PostgreSQL program runs as an unprivileged user (Debian's "postgres") through
// setpriv, which execs: the pid the kit signals is the postmaster's own. Its backends each start a
// session of their own, so faults reach them through the process tree, not the process group.
import { createHash, randomBytes } from "node:crypto";
import {
  chownSync,
  existsSync,
  readdirSync,
  readFileSync,
  realpathSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { dirname, join } from "node:path";
import type { Client, ClientConfig } from "pg";
import { findProgram } from "./binaries";
import { TestkitError } from "./errors";
import {
  badEnv,
  ExternalServer,
  externalSetting,
  LocalServer,
  makeInstanceDir,
  parseServiceUrl,
  removeInstanceDir,
  startOrDispose,
} from "./handle";
import { LOOPBACK } from "./ports";
import { runProgram } from "./run-program";
import { ServerProcess } from "./server-process";
import { copyTemplate, templateFolder } from "./template";
import type { PostgresHandle, PostgresOptions } from "./types";

/** Bump when the template's contents or the initdb arguments change meaning. */
const TEMPLATE_FORMAT = 1;
/** The superuser initdb creates, whoever runs it. */
const SUPERUSER = "postgres";
const MAINTENANCE_DATABASE = "postgres";
const DEBIAN_VERSIONS = "/usr/lib/postgresql";

/**
 * Settings of every run, on the command line (they win over postgresql.conf and ALTER SYSTEM).
 * fsync off: commits reach the OS at once, so they survive kill(), but are not flushed to disk.
 */
const SERVER_SETTINGS = [
  "listen_addresses=127.0.0.1",
  "fsync=off",
  "shared_buffers=16MB",
  "max_connections=100",
  "max_wal_senders=10",
  "wal_level=replica",
];

/**
 * pg_hba.conf of a server that checks passwords: the kit's superuser, and replication (a replica's
 * base backup and stream), without one; every other role with its password, also on the socket.
 */
const PASSWORD_HBA = `local all ${SUPERUSER} trust
host all ${SUPERUSER} ${LOOPBACK}/32 trust
local replication all trust
host replication all ${LOOPBACK}/32 trust
local all all scram-sha-256
host all all ${LOOPBACK}/32 scram-sha-256
`;

type PostgresConnectionOptions = ReturnType<PostgresHandle["connectionOptions"]>;

/** The operating-system user PostgreSQL's programs run as, when the tests run as root. */
interface OsUser {
  name: string;
  uid: number;
  gid: number;
}

/** Where the programs are and who runs them: what a starter and a replica's base backup share. */
export interface PostgresTools {
  /** Folder with postgres, initdb, pg_basebackup. */
  readonly binDir: string;
  /** Runs one of the folder's programs to completion, as the server's user. */
  run(program: string, args: string[]): Promise<void>;
  /** Gives a folder the kit made to the server's user (no-op when not root). */
  own(path: string): void;
  /** The command that runs `program` with `args` as the server's user. */
  command(program: string, args: string[]): { file: string; args: string[] };
}

let pgModule: Promise<typeof import("pg")> | undefined;

function loadPg(): Promise<typeof import("pg")> {
  pgModule ??= import("pg");
  return pgModule;
}

/**
 * A connected node-postgres client. Errors of an idle client (the server killed under it) are
 * dropped: the next query fails instead.
 */
export async function connectPostgres(config: ClientConfig): Promise<Client> {
  const { Client } = await loadPg();
  const client = new Client({ connectionTimeoutMillis: 5_000, ...config });
  client.on("error", () => {});
  await client.connect();
  return client;
}

/** Database names the kit makes: lower case, digits and underscores, at most 63 characters. */
function databaseName(prefix: string): string {
  const clean =
    prefix
      .toLowerCase()
      .replace(/[^a-z0-9_]/g, "_")
      .slice(0, 40) || "leaf_test";
  return `${clean}_${Date.now().toString(36)}_${randomBytes(4).toString("hex")}`;
}

function quoteIdentifier(name: string): string {
  return `"${name.replace(/"/g, '""')}"`;
}

/** What a PostgresHandle does beyond ServiceHandle, for private and external servers alike. */
class PostgresAccess {
  private readonly created = new Set<string>();

  constructor(
    private readonly host: () => string,
    private readonly port: () => number,
    readonly user: string,
    readonly password: string | undefined,
    private readonly defaultDatabase: string,
  ) {}

  get url(): string {
    return this.urlFor(this.defaultDatabase);
  }

  connectionOptions(database?: string): PostgresConnectionOptions {
    return {
      host: this.host(),
      port: this.port(),
      user: this.user,
      ...(this.password === undefined ? {} : { password: this.password }),
      database: database ?? this.defaultDatabase,
    };
  }

  urlFor(database: string): string {
    const credentials =
      encodeURIComponent(this.user) +
      (this.password === undefined ? "" : `:${encodeURIComponent(this.password)}`);
    const host = this.host().includes(":") ? `[${this.host()}]` : this.host();
    return `postgres://${credentials}@${host}:${this.port()}/${encodeURIComponent(database)}`;
  }

  async createDatabase(prefix = "leaf_test"): Promise<string> {
    const name = databaseName(prefix);
    const client = await connectPostgres(this.connectionOptions());
    try {
      await client.query(`CREATE DATABASE ${quoteIdentifier(name)} ENCODING 'UTF8'`);
    } finally {
      await client.end().catch(() => {});
    }
    this.created.add(name);
    return name;
  }

  /** Drops the databases createDatabase() made (on external servers, which outlive the tests). */
  async dropCreated(): Promise<void> {
    if (this.created.size === 0) return;
    const client = await connectPostgres(this.connectionOptions());
    try {
      for (const name of this.created) {
        await client.query(`DROP DATABASE IF EXISTS ${quoteIdentifier(name)} WITH (FORCE)`);
      }
      this.created.clear();
    } finally {
      await client.end().catch(() => {});
    }
  }
}

class LocalPostgres extends LocalServer implements PostgresHandle {
  declare readonly kind: "postgres";
  private readonly access = new PostgresAccess(
    () => this.host,
    () => this.port,
    SUPERUSER,
    undefined,
    MAINTENANCE_DATABASE,
  );
  readonly user = SUPERUSER;
  readonly password = undefined;

  createDatabase(prefix?: string): Promise<string> {
    return this.access.createDatabase(prefix);
  }

  connectionOptions(database?: string): PostgresConnectionOptions {
    return this.access.connectionOptions(database);
  }

  urlFor(database: string): string {
    return this.access.urlFor(database);
  }
}

class ExternalPostgres extends ExternalServer implements PostgresHandle {
  declare readonly kind: "postgres";

  constructor(
    host: string,
    port: number,
    private readonly access: PostgresAccess,
  ) {
    super("postgres", host, port, access.url);
  }

  get user(): string {
    return this.access.user;
  }

  get password(): string | undefined {
    return this.access.password;
  }

  createDatabase(prefix?: string): Promise<string> {
    return this.access.createDatabase(prefix);
  }

  connectionOptions(database?: string): PostgresConnectionOptions {
    return this.access.connectionOptions(database);
  }

  urlFor(database: string): string {
    return this.access.urlFor(database);
  }

  override async dispose(): Promise<void> {
    await super.dispose();
    await this.access.dropCreated();
  }
}

/** The newest /usr/lib/postgresql/<version>/bin with a postgres program, if any. */
function debianBinDir(): string | undefined {
  let versions: string[];
  try {
    versions = readdirSync(DEBIAN_VERSIONS);
  } catch {
    return undefined;
  }
  const newest = versions
    .filter((version) => /^\d+(\.\d+)?$/.test(version))
    .sort((a, b) => Number(b) - Number(a))
    .map((version) => join(DEBIAN_VERSIONS, version, "bin"))
    .find((bin) => existsSync(join(bin, "postgres")));
  return newest;
}

function findBinDir(explicit: string | undefined): string {
  if (explicit !== undefined) {
    findProgram("postgres", ["postgres"], join(explicit, "postgres"));
    return explicit;
  }
  return debianBinDir() ?? dirname(findProgram("postgres", ["postgres"]));
}

/** The passwd entry of `name`, read from /etc/passwd. */
function lookUpUser(name: string): OsUser {
  let passwd = "";
  try {
    passwd = readFileSync("/etc/passwd", "utf8");
  } catch {
    // Reported below as a missing user.
  }
  for (const line of passwd.split("\n")) {
    const [user, , uid, gid] = line.split(":");
    if (user === name && uid !== undefined && gid !== undefined) {
      return { name, uid: Number(uid), gid: Number(gid) };
    }
  }
  throw new TestkitError(
    "TESTKIT_START_FAILED",
    `cannot start a postgres server as root: PostgreSQL refuses to run as root and the user "${name}" ` +
      "(osUser) does not exist. Install Debian's postgresql package (it creates the user " +
      '"postgres") with `bash scripts/install-services.sh`, create the user, pass another osUser, or run the tests as a ' +
      "user other than root.",
  );
}

/** The programs and the user they run as. */
export function postgresTools(options: PostgresOptions): PostgresTools {
  const binDir = findBinDir(options.binDir);
  const user = process.getuid?.() === 0 ? lookUpUser(options.osUser ?? "postgres") : undefined;
  const setpriv = user === undefined ? undefined : findProgram("postgres", ["setpriv"]);
  const command = (program: string, args: string[]) => {
    const file = join(binDir, program);
    if (user === undefined || setpriv === undefined) return { file, args };
    return {
      file: setpriv,
      args: [`--reuid=${user.uid}`, `--regid=${user.gid}`, "--init-groups", "--", file, ...args],
    };
  };
  return {
    binDir,
    command,
    own(path) {
      if (user !== undefined) chownSync(path, user.uid, user.gid);
    },
    async run(program, args) {
      const { file, args: fullArgs } = command(program, args);
      const result = await runProgram(file, fullArgs);
      if (result.code !== 0) {
        throw new TestkitError(
          "TESTKIT_START_FAILED",
          `${program} ${args.join(" ")} failed (${result.signal ?? `code ${result.code}`}):\n${result.output.slice(-3000)}`,
        );
      }
    },
  };
}

/** The template data folder for these programs and this user, built on first use. */
async function templateDatadir(tools: PostgresTools): Promise<string> {
  const postgres = join(tools.binDir, "postgres");
  const binary = statSync(postgres);
  const key = createHash("sha256")
    .update(
      [TEMPLATE_FORMAT, postgres, binary.size, binary.mtimeMs, String(process.getuid?.() ?? "")]
        .concat(tools.command("initdb", []).args)
        .join("\0"),
    )
    .digest("hex")
    .slice(0, 12);
  return templateFolder("postgres", key, async (datadir) => {
    tools.own(dirname(datadir));
    await tools.run("initdb", [
      `--pgdata=${datadir}`,
      `--username=${SUPERUSER}`,
      "--auth=trust",
      "--encoding=UTF8",
      "--no-locale",
      "--no-sync",
    ]);
  });
}

/**
 * Starts a private server whose data folder `fill` creates (default: a copy of the initdb
 * template); for a replica, a base backup of its primary.
 */
export async function startLocalPostgres(
  options: PostgresOptions,
  tools: PostgresTools,
  fill?: (datadir: string) => Promise<void>,
): Promise<PostgresHandle> {
  const dir = await makeInstanceDir("postgres");
  const logFile = join(dir, "postgres.log");
  const datadir = join(dir, "data");
  try {
    tools.own(dir);
    if (fill === undefined) await copyTemplate(await templateDatadir(tools), datadir);
    else await fill(datadir);
  } catch (error) {
    await removeInstanceDir(dir);
    throw error;
  }
  const realDatadir = realpathSync(datadir);
  const hbaFile = join(dir, "pg_hba.conf");
  if (options.checkPasswords) writeFileSync(hbaFile, PASSWORD_HBA, { mode: 0o644 });
  const server = new ServerProcess({
    kind: "postgres",
    dir,
    logFile,
    command: (port) =>
      tools.command("postgres", [
        // The folder is in the command line, which is how the watchdog finds the process.
        "-D",
        realDatadir,
        "-c",
        `port=${port}`,
        "-c",
        `unix_socket_directories=${dir}`,
        ...SERVER_SETTINGS.flatMap((setting) => ["-c", setting]),
        ...(options.checkPasswords ? ["-c", `hba_file=${hbaFile}`] : []),
        ...(options.args ?? []),
      ]),
    probe: async (port) => {
      const client = await connectPostgres({
        host: LOOPBACK,
        port,
        user: SUPERUSER,
        database: MAINTENANCE_DATABASE,
        connectionTimeoutMillis: 2_000,
      });
      try {
        const result = await client.query<{ data_directory: string }>("SHOW data_directory");
        return result.rows[0]?.data_directory === realDatadir;
      } finally {
        await client.end().catch(() => {});
      }
    },
    readyTimeoutMs: options.readyTimeoutMs ?? 30_000,
    stopTimeoutMs: options.stopTimeoutMs ?? 10_000,
    // Every backend and auxiliary process calls setsid: a signal to the postmaster's group misses
    // them.
    processes: "descendants",
    // Fast shutdown: the postmaster ends open sessions (SIGTERM, a smart shutdown, waits for them).
    stopSignal: "SIGINT",
  });
  const handle = new LocalPostgres("postgres", dir, logFile, server, (port) => {
    return `postgres://${SUPERUSER}@${LOOPBACK}:${port}/${MAINTENANCE_DATABASE}`;
  });
  return startOrDispose(handle, server);
}

/**
 * Starts a private PostgreSQL on a free loopback port (a copy of a per-machine initdb template,
 * built once), or returns the server named by LEAF_TEST_PG_URL
 * (postgres://user:pass@host:port/database) when it is set, `useEnv` is not false and
 * `checkPasswords` is not set. Connect as "postgres" without a password; use createDatabase() for a
 * database of your own.
 */
export async function startPostgres(options: PostgresOptions = {}): Promise<PostgresHandle> {
  const setting =
    options.useEnv === false || options.checkPasswords ? undefined : externalSetting("postgres");
  if (setting !== undefined) return useExternalPostgres(setting);
  return startLocalPostgres(options, postgresTools(options));
}

async function useExternalPostgres(setting: string): Promise<PostgresHandle> {
  const {
    url: parsed,
    host,
    port,
  } = parseServiceUrl(
    "postgres",
    setting,
    ["postgres:", "postgresql:"],
    5432,
    "postgres://user:pass@host:port/database",
  );
  const user = decodeURIComponent(parsed.username) || SUPERUSER;
  const password = parsed.password ? decodeURIComponent(parsed.password) : undefined;
  const database = decodeURIComponent(parsed.pathname.replace(/^\//, "")) || MAINTENANCE_DATABASE;
  const access = new PostgresAccess(
    () => host,
    () => port,
    user,
    password,
    database,
  );
  try {
    const client = await connectPostgres(access.connectionOptions());
    await client.end();
  } catch (error) {
    throw badEnv("postgres", setting, `cannot connect (${(error as Error).message})`);
  }
  return new ExternalPostgres(host, port, access);
}
