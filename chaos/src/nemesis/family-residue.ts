// The residue set's family: A, B, C on `segment.store=residue` over two independent databases, a
// MariaDB (remainder 0: even ids) and a PostgreSQL (remainder 1: odd ids), each server reaching
// each through a proxy of its own, so that a store fault or a link cut takes one database away from
// some servers while the other still serves. The set is formed once before the servers start, as
// the server README tells an operator (`leaf-server --form-residue-set`).
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { runNode } from "@leaf/testkit";
import { serverCli } from "../leaf-process";
import { adminOn, serverConfig, snowflakeOff } from "../server-configs";
import type { Cluster, ServerSpec, StoreKind } from "./cluster";
import { type Family, httpClients, NAME, segmentPoolClients } from "./families";

/** The databases of the set, in member order: the i-th hands out the ids `id % 2 === i`. */
const MEMBERS: StoreKind[] = ["mysql", "postgres"];

/**
 * How long a range request waits for one database before asking the other too (the server's
 * default is 1 s, as long as `segment.exhaustedWaitMs`: a request could then give up just as the
 * other database is asked; the server's test runs 300 ms).
 */
const HEDGE_MS = 300;

/**
 * Segment mode on the residue set of `urls` (one per member, in order; the kit's superusers have no
 * password): fixed step, the tag list (and with it each database's residue record) re-read every
 * 2 s.
 */
function segmentOnResidue(urls: string[]) {
  return {
    segment: {
      enabled: true,
      store: "residue",
      residue: { members: urls, passwords: urls.map(() => ""), hedgeMs: HEDGE_MS },
      dynamicStep: false,
      refreshIntervalMs: 2000,
    },
  };
}

/** The set as `label` reaches it: every database through the server's own proxy. */
const membersVia = (c: Cluster, label: string) => MEMBERS.map((kind) => c.urlOf(label, kind));

/**
 * The operator's `leaf-server --form-residue-set` over the family's databases `members` (in this
 * order; reached straight, not through a server's proxy), its configuration written to `file` in
 * the run folder: the exit code and the output, lines joined by "; ".
 */
export async function runFormResidueSet(
  c: Cluster,
  members: StoreKind[],
  file: string,
  createTable = false,
): Promise<{ code: number | null; output: string }> {
  const urls = members.map((kind) => (kind === "mysql" ? c.db!.url : c.pgDb!.url));
  const config = serverConfig(NAME, segmentOnResidue(urls), snowflakeOff());
  (config.segment as { residue: Record<string, unknown> }).residue.createTable = createTable;
  const path = join(c.dir, file);
  writeFileSync(path, JSON.stringify(config));
  const run = await runNode(serverCli(), ["--form-residue-set", "--config", path], {
    cwd: c.dir,
    timeoutMs: 60_000,
  });
  return { code: run.code, output: `${run.stdout}${run.stderr}`.trim().replace(/\s*\n\s*/g, "; ") };
}

/**
 * Forms the residue set of the family's databases (their tables and tags made by `startStores`),
 * as an operator does once: `leaf-server --form-residue-set`, the databases reached straight. It
 * raises every tag in both above the highest max id of either and writes each one's residue.
 */
export async function formResidueSetOf(c: Cluster): Promise<string> {
  const run = await runFormResidueSet(c, MEMBERS, "form-residue-set.json", true);
  if (run.code !== 0) {
    throw new Error(
      `[leaf] [nemesis] leaf-server --form-residue-set failed (${run.code}): ${run.output}`,
    );
  }
  return run.output;
}

export function segmentResidueFamily(): Family {
  const tag = "nem";
  const labels = ["A", "B", "C"];
  const servers: ServerSpec[] = labels.map((label) => ({
    label,
    links: [...MEMBERS],
    config: (c: Cluster) =>
      serverConfig(NAME, segmentOnResidue(membersVia(c, label)), snowflakeOff(), adminOn()),
  }));
  const space = `segment:${tag}`;
  return {
    name: "segment-residue",
    title:
      "segment: A, B, C on a residue set (tag nem, step 1000) of a MariaDB (even ids) and a PostgreSQL (odd ids), each server through a proxy to each",
    stores: [...MEMBERS],
    // A range lasts about a second of one server's load: a database that stops answering is
    // skipped (HEDGE_MS) while the other range is still being served.
    tags: [{ tag, step: 1000 }],
    servers,
    clients: [
      // Ids increase per database only (segment README): per residue class, not across them.
      ...labels.flatMap((label) =>
        httpClients(label, "segment", space, true, { tag }).map((client) => ({
          ...client,
          residueClasses: MEMBERS.length,
        })),
      ),
      ...segmentPoolClients(labels, tag, space),
    ],
    storeCodes: ["SEGMENTS_EXHAUSTED", "NOT_INITIALIZED"],
    clockCodes: [],
    // After every database was down: the generator's retry (up to 5 s, jittered) and the set's
    // backoff of each database (up to 5 s; the one due first is asked anyway).
    recoveryMs: 8000,
    mysqlTag: tag,
    residue: [...MEMBERS],
    // A server restarted while no database answers is refused (none can be verified): retried
    // until one is back.
    restartAttempts: 6,
  };
}
