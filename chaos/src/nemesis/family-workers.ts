// The family whose servers run two worker processes each (server.workers = 2): A and B serve the
// segment tag on one MariaDB table and snowflake ids from ZooKeeper's normal mode (where a worker's
// node, `127.0.0.1~w2:port`, keeps its worker id across restarts, as a Java Leaf node does); C
// serves the embedded store (opened by its primary, ranges handed to its workers) and the local
// registry's ids 0 and 1. Its own faults kill or pause one worker, or kill the primary
// (worker-kill.ts, worker-pause.ts, primary-kill.ts); the server faults of the catalogue hit the
// primary.
import { ADMIN_TOKEN, segmentEmbedded, serverConfig, snowflakeOn } from "../server-configs";
import type { Cluster, ServerSpec } from "./cluster";
import { type ClientSpec, type Family, httpClients, NAME, segmentOnMysql } from "./families";
import { WORKERS } from "./faults/worker-pids";

/** Both kinds of client twice per server: keep-alive connections land on both workers. */
function clientsOf(label: string, segmentSpace: string, snowflakeSpace: string, tag: string) {
  return [1, 2].flatMap((n): ClientSpec[] =>
    [
      ...httpClients(label, "segment", segmentSpace, false, { tag }),
      ...httpClients(label, "snowflake", snowflakeSpace, false),
    ].map((client) => ({ ...client, name: `${client.name} #${n}` })),
  );
}

export function workersFamily(): Family {
  const tag = "nem";
  const shared = ["A", "B"];
  // The admin API on: an admin change through one worker must reach its siblings at once.
  const workers = { server: { adminToken: ADMIN_TOKEN, workers: WORKERS } };
  const servers: ServerSpec[] = shared.map((label) => ({
    label,
    links: ["mysql", "zookeeper"],
    config: (c: Cluster) =>
      serverConfig(
        NAME,
        segmentOnMysql(c, label),
        snowflakeOn("zk", { zookeeper: c.urlOf(label, "zookeeper") }, { sessionTimeoutMs: 4000 }),
        workers,
      ),
  }));
  servers.push({
    label: "C",
    links: [],
    config: () => serverConfig(NAME, segmentEmbedded("nem-embedded"), workers),
  });
  return {
    name: "workers",
    title: `two worker processes per server: A, B on one MariaDB table (tag nem, step 500) and ZooKeeper's normal mode; C on the embedded store and the local registry`,
    stores: ["mysql", "zookeeper"],
    tags: [{ tag, step: 500 }],
    servers,
    // Ids of one server come from two processes: they increase per worker, not per server.
    clients: [
      ...shared.flatMap((label) => clientsOf(label, `segment:${tag}`, "snowflake:nem", tag)),
      ...clientsOf("C", "segment:C-embedded", "snowflake:C-local", "nem-embedded"),
    ],
    storeCodes: ["SEGMENTS_EXHAUSTED", "NOT_INITIALIZED"],
    clockCodes: ["CLOCK_MOVED_BACKWARDS", "CLOCK_BEHIND", "LEASE_LOST"],
    recoveryMs: 5000,
    mysqlTag: tag,
    restartAttempts: 3,
    workers: WORKERS,
  };
}
