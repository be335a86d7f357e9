// Private MariaDB servers. mariadb-install-db takes ~0.6 s, copying a ready data folder ~40 ms, so
// one template data folder per machine is built once (template.ts) and copied for each instance.
import { createHash, randomBytes } from "node:crypto";
import { realpathSync, statSync } from "node:fs";
import { mkdir } from "node:fs/promises";
import { join } from "node:path";
import type { Connection, ConnectionOptions } from "mysql2/promise";
import { findProgram } from "./binaries";
import { TestkitError } from "./errors";
import {
  badEnv,
  ExternalServer,
  externalSetting,
  LocalServer,
  makeInstanceDir,
  parseServiceUrl,
  startOrDispose,
} from "./handle";
import { LOOPBACK } from "./ports";
import { runProgram } from "./run-program";
import { ServerProcess } from "./server-process";
import { copyTemplate, templateFolder } from "./template";
import type { MysqlHandle, MysqlOptions } from "./types";

/** Bump when the template's contents or the install arguments change meaning. */
const TEMPLATE_FORMAT = 1;

/**
 * InnoDB sizes, the same for install and every run (a different log size makes the server rebuild
 * its redo log at startup). Small, so a copy is quick and many servers fit in memory.
 */
const INNODB_ARGS = ["--innodb-log-file-size=8M", "--innodb-buffer-pool-size=32M"];

/** mariadbd runs as root only with --user=root; as anyone else it must not be given. */
function userArgs(): string[] {
  return process.getuid?.() === 0 ? ["--user=root"] : [];
}

type MysqlConnectionOptions = ReturnType<MysqlHandle["connectionOptions"]>;

let mysql2: Promise<typeof import("mysql2/promise")> | undefined;

function loadMysql2(): Promise<typeof import("mysql2/promise")> {
  mysql2 ??= import("mysql2/promise");
  return mysql2;
}

async function connect(options: ConnectionOptions): Promise<Connection> {
  const { createConnection } = await loadMysql2();
  return createConnection({ connectTimeout: 5000, ...options });
}

/** Database names the kit makes: letters, digits and underscores, at most 64 characters. */
function databaseName(prefix: string): string {
  const clean = prefix.replace(/[^A-Za-z0-9_]/g, "_").slice(0, 40) || "leaf_test";
  return `${clean}_${Date.now().toString(36)}_${randomBytes(4).toString("hex")}`;
}

/** What a MysqlHandle does beyond ServiceHandle, for private and external servers alike. */
class MysqlAccess {
  private readonly created = new Set<string>();

  constructor(
    private readonly host: () => string,
    private readonly port: () => number,
    readonly user: string,
    readonly password: string | undefined,
  ) {}

  get url(): string {
    const credentials =
      encodeURIComponent(this.user) +
      (this.password === undefined ? "" : `:${encodeURIComponent(this.password)}`);
    const host = this.host().includes(":") ? `[${this.host()}]` : this.host();
    return `mysql://${credentials}@${host}:${this.port()}/`;
  }

  connectionOptions(database?: string): MysqlConnectionOptions {
    return {
      host: this.host(),
      port: this.port(),
      user: this.user,
      ...(this.password === undefined ? {} : { password: this.password }),
      ...(database === undefined ? {} : { database }),
    };
  }

  urlFor(database: string): string {
    return `${this.url}${encodeURIComponent(database)}`;
  }

  async createDatabase(prefix = "leaf_test"): Promise<string> {
    const name = databaseName(prefix);
    const connection = await connect(this.connectionOptions());
    try {
      await connection.query(
        `CREATE DATABASE \`${name}\` CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci`,
      );
    } finally {
      await connection.end();
    }
    this.created.add(name);
    return name;
  }

  /** Drops the databases createDatabase() made (on external servers, which outlive the tests). */
  async dropCreated(): Promise<void> {
    if (this.created.size === 0) return;
    const connection = await connect(this.connectionOptions());
    try {
      for (const name of this.created)
        await connection.query(`DROP DATABASE IF EXISTS \`${name}\``);
      this.created.clear();
    } finally {
      await connection.end();
    }
  }
}

class LocalMysql extends LocalServer implements MysqlHandle {
  declare readonly kind: "mysql";
  private readonly access = new MysqlAccess(
    () => this.host,
    () => this.port,
    "root",
    undefined,
  );
  readonly user = "root";
  readonly password = undefined;

  createDatabase(prefix?: string): Promise<string> {
    return this.access.createDatabase(prefix);
  }

  connectionOptions(database?: string): MysqlConnectionOptions {
    return this.access.connectionOptions(database);
  }

  urlFor(database: string): string {
    return this.access.urlFor(database);
  }
}

class ExternalMysql extends ExternalServer implements MysqlHandle {
  declare readonly kind: "mysql";

  constructor(
    host: string,
    port: number,
    private readonly access: MysqlAccess,
  ) {
    super("mysql", host, port, access.url);
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

  connectionOptions(database?: string): MysqlConnectionOptions {
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

/** The template data folder for this mariadbd and these arguments, built on first use. */
async function templateDatadir(installDb: string, mariadbd: string): Promise<string> {
  const binary = statSync(mariadbd);
  const key = createHash("sha256")
    .update(
      [TEMPLATE_FORMAT, mariadbd, binary.size, binary.mtimeMs, installDb, ...INNODB_ARGS]
        .concat(String(process.getuid?.() ?? ""))
        .join("\0"),
    )
    .digest("hex")
    .slice(0, 12);
  return templateFolder("mariadb", key, async (datadir) => {
    const result = await runProgram(installDb, [
      "--no-defaults",
      `--datadir=${datadir}`,
      ...userArgs(),
      "--auth-root-authentication-method=normal",
      "--skip-test-db",
      ...INNODB_ARGS,
    ]);
    if (result.code !== 0) {
      throw new TestkitError(
        "TESTKIT_START_FAILED",
        `${installDb} failed (${result.signal ?? `code ${result.code}`}):\n${result.output.slice(-3000)}`,
      );
    }
  });
}

/**
 * Starts a private MariaDB on a free loopback port (about 0.2 s once the per-machine template data
 * folder exists, plus ~0.6 s the first time), or returns the server named by LEAF_TEST_MYSQL_URL
 * (mysql://user:pass@host:port/) when it is set and `useEnv` is not false. Connect as root without
 * a password; use createDatabase() for a database of your own.
 */
export async function startMysql(options: MysqlOptions = {}): Promise<MysqlHandle> {
  const setting = options.useEnv === false ? undefined : externalSetting("mysql");
  if (setting !== undefined) return useExternalMysql(setting);

  const mariadbd = findProgram("mysql", ["mariadbd", "mysqld"], options.mariadbd);
  const installDb = findProgram(
    "mysql",
    ["mariadb-install-db", "mysql_install_db"],
    options.installDb,
  );
  const template = await templateDatadir(installDb, mariadbd);
  const dir = await makeInstanceDir("mysql");
  const datadir = join(dir, "data");
  const logFile = join(dir, "mariadb.log");
  await copyTemplate(template, datadir);
  await mkdir(join(dir, "tmp"));
  const expectedDatadir = `${realpathSync(datadir)}/`;

  const server = new ServerProcess({
    kind: "mysql",
    dir,
    logFile,
    command: (port) => ({
      file: mariadbd,
      args: [
        "--no-defaults",
        // The folder is in the command line, which is how the watchdog finds the process.
        `--datadir=${datadir}`,
        `--port=${port}`,
        `--bind-address=${LOOPBACK}`,
        `--socket=${join(dir, "mysqld.sock")}`,
        `--pid-file=${join(dir, "mysqld.pid")}`,
        `--tmpdir=${join(dir, "tmp")}`,
        ...userArgs(),
        "--skip-log-bin",
        "--skip-name-resolve",
        ...INNODB_ARGS,
        // Commits reach the OS at once (so they survive kill()) but are not fsynced: faster tests.
        "--innodb-flush-log-at-trx-commit=2",
        // Native AIO contexts are a per-machine budget that a few dozen servers can exhaust.
        "--innodb-use-native-aio=0",
        "--character-set-server=utf8mb4",
        "--collation-server=utf8mb4_general_ci",
        ...(options.args ?? []),
      ],
    }),
    probe: async (port) => {
      const connection = await connect({
        host: LOOPBACK,
        port,
        user: "root",
        connectTimeout: 2000,
      });
      try {
        const [rows] = await connection.query("SELECT @@datadir AS datadir");
        return (rows as Array<{ datadir: string }>)[0]?.datadir === expectedDatadir;
      } finally {
        connection.destroy();
      }
    },
    readyTimeoutMs: options.readyTimeoutMs ?? 30_000,
    stopTimeoutMs: options.stopTimeoutMs ?? 10_000,
  });
  const handle = new LocalMysql("mysql", dir, logFile, server, (port) => {
    return `mysql://root@${LOOPBACK}:${port}/`;
  });
  return startOrDispose(handle, server);
}

async function useExternalMysql(setting: string): Promise<MysqlHandle> {
  const {
    url: parsed,
    host,
    port,
  } = parseServiceUrl(
    "mysql",
    setting,
    ["mysql:", "mariadb:"],
    3306,
    "mysql://user:pass@host:port/",
  );
  const user = decodeURIComponent(parsed.username) || "root";
  const password = parsed.password ? decodeURIComponent(parsed.password) : undefined;
  const access = new MysqlAccess(
    () => host,
    () => port,
    user,
    password,
  );
  try {
    const connection = await connect(access.connectionOptions());
    await connection.end();
  } catch (error) {
    throw badEnv("mysql", setting, `cannot connect (${(error as Error).message})`);
  }
  return new ExternalMysql(host, port, access);
}
