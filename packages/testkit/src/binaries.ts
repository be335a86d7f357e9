// Finds the server programs, and when one is missing says exactly what to install or set instead.
import { accessSync, constants, existsSync } from "node:fs";
import { delimiter, join } from "node:path";
import { TestkitError } from "./errors";
import type { ServiceKind } from "./types";

/** The variable that points the tests at an existing server instead. */
export const ENV_VARS: Record<ServiceKind, string> = {
  mysql: "LEAF_TEST_MYSQL_URL",
  postgres: "LEAF_TEST_PG_URL",
  redis: "LEAF_TEST_REDIS_URL",
  zookeeper: "LEAF_TEST_ZK",
  etcd: "LEAF_TEST_ETCD_URL",
};

const PACKAGES: Record<ServiceKind, string> = {
  mysql: "mariadb-server",
  postgres: "postgresql",
  redis: "redis-server",
  zookeeper: "zookeeper default-jre-headless",
  etcd: "etcd-server",
};

const ENV_EXAMPLES: Record<ServiceKind, string> = {
  mysql: "LEAF_TEST_MYSQL_URL=mysql://user:pass@host:3306/",
  postgres: "LEAF_TEST_PG_URL=postgres://user:pass@host:5432/postgres",
  redis: "LEAF_TEST_REDIS_URL=redis://host:6379",
  zookeeper: "LEAF_TEST_ZK=host:2181",
  etcd: "LEAF_TEST_ETCD_URL=http://host:2379",
};

/** Places servers are installed outside a user's PATH (sbin is often missing from it). */
const EXTRA_DIRS = ["/usr/sbin", "/usr/bin", "/usr/local/sbin", "/usr/local/bin", "/sbin", "/bin"];

function executable(path: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/** The error for a missing program or file, naming it and the three ways out. */
export function missingError(kind: ServiceKind, what: string, looked: string): TestkitError {
  return new TestkitError(
    "TESTKIT_BINARY_MISSING",
    `cannot start a ${kind} server: ${what} not found (${looked}). Install the servers with ` +
      "`bash scripts/install-services.sh` from the repository root (as root), or " +
      `\`apt-get install ${PACKAGES[kind]}\`, or point the tests at a running server with ` +
      `${ENV_EXAMPLES[kind]}.`,
  );
}

/**
 * Resolves a program: `explicit` when given (it must exist), else the first of `names` found in
 * PATH or the usual system folders.
 */
export function findProgram(kind: ServiceKind, names: string[], explicit?: string): string {
  if (explicit !== undefined) {
    if (executable(explicit)) return explicit;
    throw missingError(kind, explicit, "the path given in the options");
  }
  const dirs = [...(process.env.PATH ?? "").split(delimiter).filter(Boolean), ...EXTRA_DIRS];
  for (const name of names) {
    for (const dir of dirs) {
      const candidate = join(dir, name);
      if (executable(candidate)) return candidate;
    }
  }
  throw missingError(kind, names.join(" or "), "looked in PATH, /usr/sbin and /usr/local/sbin");
}

/** Throws the missing-file error unless every path exists. */
export function requireFiles(kind: ServiceKind, paths: string[]): void {
  for (const path of paths) {
    if (!existsSync(path)) throw missingError(kind, path, "no such file");
  }
}
