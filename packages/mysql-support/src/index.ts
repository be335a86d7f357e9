// `@leaf/mysql-support`: what the MySQL adapters (@leaf/registry-mysql, @leaf/segment-mysql) share,
// kept here once so that @leaf/core knows no database.
export {
  classifyMysqlError,
  describeMysqlError,
  type MysqlErrorContext,
  type MysqlErrorInfo,
  type MysqlErrorKind,
  type MysqlFixes,
  mysqlError,
} from "./mysql-errors";
export {
  type MysqlHost,
  type MysqlUrlOptions,
  type ParsedMysqlUrl,
  parseMysqlUrl,
  redactMysqlUrl,
} from "./mysql-url";
export { OpenSockets, type PoolEndOutcome } from "./open-sockets";
