// The fault catalogue the generator draws from. Adding a fault is one file and one line here.
import { adminOp } from "./admin-op";
import { clockBack } from "./clock-back";
import { clockBlipKill } from "./clock-blip-kill";
import { clockForward } from "./clock-forward";
import { clockForwardCut } from "./clock-forward-cut";
import { defaultsStart } from "./defaults-start";
import type { Fault } from "./fault";
import { fullDisk } from "./full-disk";
import { giveBackChain } from "./give-back-chain";
import { giveBackQueued } from "./give-back-queued";
import { linkCut } from "./link-cut";
import { maxIdBack } from "./max-id-back";
import { postgresPromoted } from "./postgres-promoted";
import { primaryKill } from "./primary-kill";
import { redisMasterResynced } from "./redis-master-resynced";
import { redisPromoted } from "./redis-promoted";
import { redisRestartEmpty } from "./redis-restart-empty";
import { redisRestartSnapshot } from "./redis-restart-snapshot";
import { redisResyncPromoted } from "./redis-resync-promoted";
import { replicaPromoted } from "./replica-promoted";
import { residueOutage } from "./residue-outage";
import { residueReform } from "./residue-reform";
import { rowLock } from "./row-lock";
import { sameIdentity } from "./same-identity";
import { secondPod } from "./second-pod";
import { serverKill } from "./server-kill";
import { serverPause } from "./server-pause";
import { serverTerm } from "./server-term";
import { sessionLostIdentity } from "./session-lost-identity";
import { standby } from "./standby";
import { standbyFollower } from "./standby-follower";
import { storeKill } from "./store-kill";
import { storePause } from "./store-pause";
import { workerKill } from "./worker-kill";
import { workerPause } from "./worker-pause";
import { zkFollowerPartition } from "./zk-follower-partition";

/** Every fault, by name. */
export const CATALOGUE: readonly Fault[] = [
  serverPause,
  serverKill,
  serverTerm,
  linkCut,
  storePause,
  storeKill,
  clockBack,
  clockForward,
  clockForwardCut,
  rowLock,
  adminOp,
  secondPod,
  standby,
  maxIdBack,
  defaultsStart,
  zkFollowerPartition,
  standbyFollower,
  fullDisk,
  replicaPromoted,
  postgresPromoted,
  redisRestartEmpty,
  redisPromoted,
  redisRestartSnapshot,
  redisResyncPromoted,
  redisMasterResynced,
  residueOutage,
  residueReform,
  workerKill,
  workerPause,
  primaryKill,
  giveBackQueued,
  sameIdentity,
  sessionLostIdentity,
  giveBackChain,
  clockBlipKill,
];

/** The fault named `name`, or an error listing the catalogue. */
export function faultNamed(name: string): Fault {
  const fault = CATALOGUE.find((f) => f.name === name);
  if (!fault) {
    throw new Error(
      `[leaf] [nemesis] unknown fault ${name}; the catalogue has: ${CATALOGUE.map((f) => f.name).join(", ")}`,
    );
  }
  return fault;
}
