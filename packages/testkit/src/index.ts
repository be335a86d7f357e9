// Public entry of @leaf/testkit: private MariaDB, PostgreSQL, Redis, ZooKeeper and etcd servers
// for tests, faults on demand, separate node processes, Leaf servers as real processes (optionally
// under a fake clock), and cleanup that survives a killed test process.
export { ChildLines } from "./child-lines";
export { stopAll } from "./cleanup";
export {
  type ClockStepHandOver,
  type ClockStepHandOverOptions,
  type ClockStepRestart,
  type ClockStepRestartOptions,
  clockStepHandOver,
  clockStepRestart,
  type IdSource,
  printIdsUntilKilled,
  type SecondHolder,
} from "./clock-step";
export {
  countDuplicates,
  countRepeatedIds,
  type DuplicateCount,
  type IdArray,
  IdLog,
  type RepeatedIds,
} from "./duplicates";
export { TestkitError, type TestkitErrorCode } from "./errors";
export { type EtcdHandle, type EtcdOptions, startEtcd } from "./etcd";
export { FakeClock, type FakeClockOptions, findLibfaketime } from "./faketime";
export { isExternal } from "./handle";
export { type GetOptions, type HttpAnswer, httpGet, keepAliveAgent, NoAnswer } from "./http-get";
export {
  LeafServerProcess,
  type LeafServerProcessOptions,
  type ProcessExit,
  type StartOutcome,
} from "./leaf-server-process";
export { startMysql } from "./mysql";
export {
  type MysqlReplicaPair,
  type MysqlReplicaPairOptions,
  startMysqlReplicaPair,
} from "./mysql-replication";
export {
  type RunNodeOptions,
  type RunNodeResult,
  runNode,
  type SpawnNodeOptions,
  spawnNode,
} from "./node-process";
export { type PipelinedAnswer, PipelinedConnection } from "./pipelined";
export { freePort } from "./ports";
export { connectPostgres, startPostgres } from "./postgres";
export {
  type PostgresReplicaPair,
  type PostgresReplicaPairOptions,
  startPostgresReplicaPair,
} from "./postgres-replication";
export { exchange } from "./probes";
export { waitUntilStopped } from "./process-state";
export { startRedis } from "./redis";
export {
  type RedisClusterNode,
  type RedisClusterOptions,
  type RedisClusterPair,
  redisClusterNodes,
  redisClusterPairThroughProxy,
  redisKeyInSlots,
  redisReplicaCommand,
  startRedisCluster,
} from "./redis-cluster";
export {
  redisCommand,
  redisHash,
  redisInfoField,
  redisReplicaInSync,
  redisTimeMs,
} from "./redis-command";
export {
  type RedisReplicaSet,
  type RedisReplicaSetOptions,
  redisErrorCount,
  redisReplicaLags,
  startRedisReplicaSet,
} from "./redis-replica-set";
export { type PausedOutcome, settlesWhilePaused } from "./settles-while-paused";
export { started, startedRetrying } from "./started";
export { type ClientDataListener, TcpProxy, type TcpProxyOptions } from "./tcp-proxy";
export type {
  MysqlHandle,
  MysqlOptions,
  PostgresHandle,
  PostgresOptions,
  RedisHandle,
  RedisOptions,
  ServiceHandle,
  ServiceKind,
  StartOptions,
  ZookeeperHandle,
  ZookeeperOptions,
} from "./types";
export { pollFor, waitUntil } from "./wait-until";
export { startZookeeper } from "./zookeeper";
export {
  startZookeeperEnsemble,
  type ZookeeperEnsembleHandle,
  type ZookeeperEnsembleOptions,
  type ZookeeperMemberHandle,
  type ZookeeperMemberMode,
} from "./zookeeper-ensemble";
