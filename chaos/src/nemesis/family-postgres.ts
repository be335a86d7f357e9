// The PostgreSQL families: segment mode with A, B, C on one leaf_alloc table of a primary with a
// streaming replica (each server's URL lists both hosts, the primary through the server's proxy, so
// the store fails over by itself and refuses a split brain), and the snowflake registry on the same
// kind of pair (its URL names one host, the server's proxy: a virtual IP a failover moves). The
// replica is what `postgres-promoted` promotes.
import { segmentOnPostgres } from "../postgres-kit";
import { adminOn, serverConfig, snowflakeOff } from "../server-configs";
import type { Cluster, ServerSpec } from "./cluster";
import { type Family, httpClients, NAME, segmentPoolClients } from "./families";

/**
 * Segment mode on the family's PostgreSQL, the primary through `label`'s proxy and the replica
 * straight: fixed step, the tag list re-read every 2 s (a tag refused after a promotion is served
 * again soon after the operator's fix).
 */
function segmentOnPostgresOf(c: Cluster, label: string) {
  return segmentOnPostgres(c.urlOf(label, "postgres"), { refreshIntervalMs: 2000 });
}

/** The postgres registry's keys for `label`: one host, its proxy; `leaseMs` short. */
export function postgresRegistryOf(c: Cluster, label: string, leaseMs: number) {
  const url = c.pgDb!.oneHostVia(c.proxy(label, "postgres").port);
  return { registry: "postgres", postgres: { url, password: "", leaseMs } };
}

export function segmentPostgresFamily(): Family {
  const tag = "nem";
  const labels = ["A", "B", "C"];
  const servers: ServerSpec[] = labels.map((label) => ({
    label,
    links: ["postgres"],
    config: (c: Cluster) =>
      serverConfig(NAME, segmentOnPostgresOf(c, label), snowflakeOff(), adminOn()),
  }));
  const space = `segment:${tag}`;
  return {
    name: "segment-postgres",
    title:
      "segment: A, B, C on one PostgreSQL table (tag nem, step 500), a primary with a streaming replica, each server's URL listing both",
    stores: ["postgres"],
    tags: [{ tag, step: 500 }],
    servers,
    clients: [
      ...labels.flatMap((label) => httpClients(label, "segment", space, true, { tag })),
      ...segmentPoolClients(labels, tag, space),
    ],
    storeCodes: ["SEGMENTS_EXHAUSTED", "NOT_INITIALIZED"],
    clockCodes: [],
    recoveryMs: 5000,
    postgresTag: tag,
    postgresReplica: true,
    restartAttempts: 2,
  };
}
