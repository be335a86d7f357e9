// Every scenario, in run order: the faults, one scenario each, injected while load runs. Each
// scenario file holds one family; a family that varies only by registry or fault is one function
// taking the variant (sigkillRestart, zookeeperFault, processPause, clockRestartBehind...).
import type { Scenario } from "./scenario-kit";
import {
  clockBack,
  clockBackup,
  clockRestartBehind,
  clockRestartBehindReport,
} from "./scenarios-clock";
import { fullDisk, mysqlSplitBrain, sharedFolder } from "./scenarios-data";
import { etcdRegistry } from "./scenarios-etcd-registry";
import { processPause, zookeeperPartition } from "./scenarios-fencing";
import { postgresFailover, postgresKill, postgresSplitBrain } from "./scenarios-postgres";
import { postgresPausePastLease, postgresRegistryFailover } from "./scenarios-postgres-registry";
import { sigkillRestart } from "./scenarios-process";
import { redisRegistry } from "./scenarios-redis-registry";
import {
  mariadbKill,
  mariadbPause,
  mariadbPausePastLease,
  redisKill,
  slowNetwork,
  zookeeperFault,
} from "./scenarios-stores";

export type { FaultKind, Scenario } from "./scenario-kit";

/** Every scenario, in run order. The short form runs those marked `short`: one of each kind. */
export const SCENARIOS: readonly Scenario[] = [
  sigkillRestart("zk", true),
  sigkillRestart("zk-recycle", false),
  sigkillRestart("mysql", false),
  sigkillRestart("mysql-lease", false),
  sigkillRestart("local", false),
  processPause("mysql-lease"),
  processPause("zk-recycle"),
  mariadbKill,
  mariadbPause,
  mariadbPausePastLease,
  mysqlSplitBrain,
  postgresKill,
  postgresPausePastLease,
  postgresFailover,
  postgresSplitBrain,
  postgresRegistryFailover,
  zookeeperFault("kill", false),
  zookeeperFault("pause", true),
  zookeeperPartition,
  redisKill,
  redisRegistry,
  etcdRegistry,
  clockBack(["3ms", "2s", "1h", "restart-behind"], true),
  clockBackup,
  clockRestartBehind("local"),
  clockRestartBehind("mysql"),
  clockRestartBehindReport("local"),
  clockRestartBehindReport("mysql"),
  clockRestartBehindReport("zk"),
  fullDisk,
  sharedFolder,
  slowNetwork,
];

/** The scenarios of a form. */
export function scenariosOf(form: "short" | "full"): Scenario[] {
  return SCENARIOS.filter((x) => form === "full" || x.short);
}
