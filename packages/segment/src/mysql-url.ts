// The segment package's parseMysqlUrl: @leaf/core's parser (mysql://, mariadb://, jdbc:mysql://,
// several hosts for failover) with its errors raised by "segment", kept for this package's callers.
import { type ParsedMysqlUrl, parseMysqlUrl as parseUrl } from "@leaf/core";
import { COMPONENT } from "./validation";

export type { MysqlHost, ParsedMysqlUrl } from "@leaf/core";

/**
 * Parses `mysql://user:password@host1:3306,host2:3306/database?params` (also `mariadb://` and
 * `jdbc:mysql://`), as `parseMysqlUrl` of @leaf/core does. Throws INVALID_CONFIG from "segment"
 * naming `key`, with the password hidden.
 */
export function parseMysqlUrl(url: string, key = "url"): ParsedMysqlUrl {
  return parseUrl(url, { key, component: COMPONENT });
}
