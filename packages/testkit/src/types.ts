// The shapes tests code against: a handle on one server, private or external, and start options.

/** The servers the kit can run. */
export type ServiceKind = "mysql" | "postgres" | "redis" | "zookeeper" | "etcd";

/**
 * One server a test talks to. A private server (started by the kit) can be broken on demand; an
 * external one (from a `LEAF_TEST_*` variable) cannot, and its fault methods throw a
 * {@link TestkitError} with code `TESTKIT_EXTERNAL_SERVER`.
 */
export interface ServiceHandle {
  /** Which server this is. */
  readonly kind: ServiceKind;
  /** Host to connect to: "127.0.0.1" for private servers. */
  readonly host: string;
  /** TCP port; a private server keeps it across restarts. */
  readonly port: number;
  /**
   * mysql: "mysql://root@127.0.0.1:P/"; postgres: "postgres://postgres@127.0.0.1:P/postgres";
   * redis: "redis://127.0.0.1:P"; zookeeper: "127.0.0.1:P"; etcd: "http://127.0.0.1:P".
   */
  readonly url: string;
  /**
   * True when an existing server from a `LEAF_TEST_*` variable is used instead of a private one.
   */
  readonly external: boolean;
  /** Pid of the server process while it runs; undefined while stopped and for external servers. */
  readonly pid: number | undefined;
  /** Whether the server process is alive (also while paused); always true for external servers. */
  readonly running: boolean;
  /** The instance's temp folder (data, config, log); undefined for external servers. */
  readonly dir: string | undefined;
  /**
   * The server's stdout and stderr, for debugging a failing test; undefined for external servers.
   */
  readonly logFile: string | undefined;
  /** SIGKILL: a crash. Resolves once the process has exited; the data folder is kept. */
  kill(): Promise<void>;
  /** SIGSTOP: connections stay open but nothing is answered (a hung server, a network stall). */
  pause(): void;
  /** SIGCONT: undoes pause(). */
  resume(): void;
  /**
   * Graceful SIGTERM, then SIGKILL after the grace period; resolves once the process has exited.
   */
  stop(): Promise<void>;
  /**
   * Starts the server again on the same port with the same data folder; resolves when it answers.
   */
  start(): Promise<void>;
  /** stop() then start(). */
  restart(): Promise<void>;
  /**
   * Kills the server and removes its temp folder. For external servers: drops the databases this
   * handle created.
   */
  dispose(): Promise<void>;
}

/** A MariaDB (MySQL protocol) server; root without a password for private servers. */
export interface MysqlHandle extends ServiceHandle {
  readonly kind: "mysql";
  /** User the kit connects as: "root" for private servers. */
  readonly user: string;
  /** Password, undefined when there is none (private servers). */
  readonly password: string | undefined;
  /**
   * Creates a new, uniquely named, empty database (utf8mb4) and returns its name, so tests sharing
   * a server (also an external one) do not see each other's tables. `prefix` defaults to
   * "leaf_test".
   */
  createDatabase(prefix?: string): Promise<string>;
  /** mysql2 connection options for `database` (or no default database). */
  connectionOptions(database?: string): {
    host: string;
    port: number;
    user: string;
    password?: string;
    database?: string;
  };
  /** `url` with the database name appended: "mysql://root@127.0.0.1:P/name". */
  urlFor(database: string): string;
}

/**
 * A PostgreSQL server; the superuser "postgres" without a password (trust authentication on
 * loopback) for private servers.
 */
export interface PostgresHandle extends ServiceHandle {
  readonly kind: "postgres";
  /** Role the kit connects as: "postgres" for private servers. */
  readonly user: string;
  /** Password, undefined when there is none (private servers). */
  readonly password: string | undefined;
  /**
   * Creates a new, uniquely named, empty database (UTF8, lower-case name) and returns its name, so
   * tests sharing a server (also an external one) do not see each other's tables. `prefix`
   * defaults to "leaf_test".
   */
  createDatabase(prefix?: string): Promise<string>;
  /**
   * node-postgres (`new pg.Client(...)`) options for `database` (default: the server's maintenance
   * database, "postgres", or the database of LEAF_TEST_PG_URL).
   */
  connectionOptions(database?: string): {
    host: string;
    port: number;
    user: string;
    password?: string;
    database: string;
  };
  /** `url` with another database: "postgres://postgres@127.0.0.1:P/name". */
  urlFor(database: string): string;
}

/** A Redis server (no persistence: it comes back empty after kill() or stop()). */
export interface RedisHandle extends ServiceHandle {
  readonly kind: "redis";
}

/** A standalone ZooKeeper server (data survives kill() and stop()). */
export interface ZookeeperHandle extends ServiceHandle {
  readonly kind: "zookeeper";
  /** Connection string for node-zookeeper-client: "127.0.0.1:P". */
  readonly connectString: string;
}

/** Options every starter takes. */
export interface StartOptions {
  /**
   * Use the server named by the `LEAF_TEST_*` variable when it is set (default true). False always
   * starts a private server, for tests that must break it.
   */
  useEnv?: boolean;
  /** ms to wait until a new server answers (default 30 000). */
  readyTimeoutMs?: number;
  /** ms stop() waits after SIGTERM before it sends SIGKILL (default 10 000). */
  stopTimeoutMs?: number;
  /**
   * Extra command-line arguments for the server (for ZooKeeper: JVM flags, before the main class).
   */
  args?: string[];
}

/** Options of startMysql(). */
export interface MysqlOptions extends StartOptions {
  /** Path to mariadbd (or MariaDB's older name, mysqld) when it is not in PATH or /usr/sbin. */
  mariadbd?: string;
  /** Path to mariadb-install-db (or MariaDB's older mysql_install_db) when it is not in PATH. */
  installDb?: string;
}

/** Options of startPostgres(). */
export interface PostgresOptions extends StartOptions {
  /**
   * Folder holding postgres, initdb and pg_basebackup (default: the newest
   * /usr/lib/postgresql/<version>/bin, else PATH).
   */
  binDir?: string;
  /**
   * Operating-system user the server runs as when the tests run as root (PostgreSQL refuses to
   * run as root); default "postgres", the user Debian's package creates. Ignored when not root.
   */
  osUser?: string;
  /**
   * Check passwords (default false: every role logs in without one). When true, the superuser
   * "postgres" still logs in without a password (the kit creates databases and roles as it), and
   * every other role must give its own (scram-sha-256; create it with `CREATE ROLE name LOGIN
   * PASSWORD '...'`). Always a private server: LEAF_TEST_PG_URL is not used.
   */
  checkPasswords?: boolean;
}

/** Options of startRedis(). */
export interface RedisOptions extends StartOptions {
  /** Path to redis-server when it is not in PATH. */
  redisServer?: string;
}

/** Options of startZookeeper(). */
export interface ZookeeperOptions extends StartOptions {
  /** ZooKeeper's time unit in ms (default 500, so short session timeouts are allowed). */
  tickTime?: number;
  /** Smallest session timeout a client may negotiate, ms (default 2 × tickTime). */
  minSessionTimeout?: number;
  /** Largest session timeout a client may negotiate, ms (default 20 × tickTime). */
  maxSessionTimeout?: number;
  /** JVM heap limit in MB (default 256), small so several servers fit at once. */
  heapMb?: number;
  /** Path to java when it is not in PATH. */
  java?: string;
  /**
   * Java classpath holding ZooKeeper and its dependencies (default: Debian's /usr/share/java jars).
   */
  classpath?: string;
}
