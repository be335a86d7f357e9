// A MySQL database as the configuration names it (segment store or snowflake registry): the URL
// checked, and the user and password from their keys or from the URL.
import { parseMysqlUrl } from "@leaf/mysql-support";
import type { ConfigKey } from "./config-keys";
import type { MysqlSettings } from "./config-types";
import type { ConfigValues } from "./config-values";

const COMPONENT = "server";

/** The keys a database's settings came from, to name in problems. */
export interface MysqlKeys {
  url: ConfigKey;
  user: ConfigKey;
  password: ConfigKey;
}

/**
 * The settings of the database at `url`; undefined (with the problems noted) when the URL names no
 * database, or the user or the password is neither set nor in the URL.
 */
export function mysqlSettings(
  v: ConfigValues,
  url: string,
  user: string | undefined,
  password: string | undefined,
  keys: MysqlKeys,
): MysqlSettings | undefined {
  let parsed: ReturnType<typeof parseMysqlUrl>;
  try {
    parsed = parseMysqlUrl(url, { key: keys.url, component: COMPONENT });
  } catch (error) {
    v.problem(keys.url, `invalid ${v.label(keys.url)}: ${(error as Error).message}`);
    return undefined;
  }
  let ok = true;
  if (parsed.database === undefined) {
    v.problem(
      keys.url,
      `invalid ${v.label(keys.url)}: the URL names no database; expected jdbc:mysql://host:3306/leaf (the path is the database)`,
    );
    ok = false;
  }
  const finalUser = user ?? parsed.user;
  if (finalUser === undefined) {
    v.problem(
      keys.user,
      `missing ${v.label(keys.user)}: the database URL has no user, so the user name is needed`,
    );
    ok = false;
  }
  const finalPassword = password ?? parsed.password;
  if (finalPassword === undefined) {
    v.problem(
      keys.password,
      `missing ${v.label(keys.password)}: a database is configured, so its password is needed (set it empty for a user without a password)`,
    );
    ok = false;
  }
  if (!ok) return undefined;
  return { url, user: finalUser, password: finalPassword!, table: undefined, createTable: false };
}
