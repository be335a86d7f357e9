// What the PostgreSQL scenarios and nemesis families share: a database on a private PostgreSQL (the
// test kit's) with the segment store's leaf_alloc table and tags and the registry's lease table,
// the servers' URLs to it (a host list when it has a streaming replica: the store fails over by
// itself), and the server configurations of segment mode and the registry on it.
import { PostgresRegistry } from "@leaf/registry-postgres";
import { PostgresSegmentStore } from "@leaf/segment-postgres";
import type { PostgresHandle } from "@leaf/testkit";
import type { SegmentDatabase } from "./services";

type Config = Record<string, unknown>;

/** A segment database on PostgreSQL; its max ids are read from one server, chosen by `readFrom`. */
export interface PostgresDatabase extends SegmentDatabase {
  /** The database through `port` (a proxy) alone: the registry names one host. */
  oneHostVia(port: number): string;
  /** Reads max ids (and describes tags) from `server` from now on (a promoted replica). */
  readFrom(server: PostgresHandle): void;
}

/** "postgres://postgres@127.0.0.1:P1,127.0.0.1:P2/db": hosts in failover order. */
export function postgresUrl(user: string, ports: number[], database: string): string {
  return `postgres://${user}@${ports.map((port) => `127.0.0.1:${port}`).join(",")}/${database}`;
}

/**
 * A new database on `primary` with the leaf_alloc table, `tags` in it (each starting at id 1) and
 * the registry's lease table. With `replica` (a streaming replica of `primary`) the servers' URL
 * lists both, the primary first; `urlVia(port)` puts `port` (a proxy) in the primary's place.
 */
export async function postgresDatabase(
  primary: PostgresHandle,
  tags: Array<{ tag: string; step: number }>,
  replica?: PostgresHandle,
): Promise<PostgresDatabase> {
  const database = await primary.createDatabase("leaf_chaos");
  const store = new PostgresSegmentStore({ url: primary.urlFor(database) });
  try {
    await store.createSchema();
    for (const { tag, step } of tags) {
      await store.createTag({ tag, step, description: "chaos suite" });
    }
  } finally {
    await store.close();
  }
  // The registry's table too: servers starting at once would race to create it.
  const registry = new PostgresRegistry({ url: primary.urlFor(database) });
  try {
    await registry.createSchema();
  } finally {
    await registry.close();
  }
  const others = replica ? [replica.port] : [];
  let reader = new PostgresSegmentStore({ url: primary.urlFor(database) });
  return {
    database,
    url: postgresUrl(primary.user, [primary.port, ...others], database),
    urlVia: (port) => postgresUrl(primary.user, [port, ...others], database),
    oneHostVia: (port) => postgresUrl(primary.user, [port], database),
    describe: () => reader.describeTags(),
    async maxId(tag) {
      const row = (await reader.describeTags()).find((r) => r.tag === tag);
      if (!row) throw new Error(`[leaf] [chaos] tag ${tag} is missing from ${database}`);
      return row.maxId;
    },
    readFrom(server) {
      void reader.close();
      reader = new PostgresSegmentStore({ url: server.urlFor(database) });
    },
    close: () => reader.close(),
  };
}

/**
 * Segment mode on the PostgreSQL table at `url` (password empty: the kit's superuser has none);
 * fixed step, and the tag list re-read every `refreshIntervalMs` when given.
 */
export function segmentOnPostgres(
  url: string,
  options: { exhaustedWaitMs?: number; refreshIntervalMs?: number } = {},
): Config {
  return {
    segment: {
      enabled: true,
      store: "postgres",
      postgres: { url, password: "" },
      dynamicStep: false,
      ...(options.exhaustedWaitMs !== undefined
        ? { exhaustedWaitMs: options.exhaustedWaitMs }
        : {}),
      ...(options.refreshIntervalMs !== undefined
        ? { refreshIntervalMs: options.refreshIntervalMs }
        : {}),
    },
  };
}

/**
 * Snowflake mode on the PostgreSQL registry at `url` (one host); node identity 127.0.0.1 and the
 * listening port. `workerBits` 0: one worker id, for servers that must compete for it;
 * `statefulSet`: the worker id is the HOSTNAME's ordinal.
 */
export function snowflakeOnPostgres(
  url: string,
  options: { leaseMs?: number; workerBits?: number; statefulSet?: boolean } = {},
): Config {
  return {
    snowflake: {
      enabled: true,
      ip: "127.0.0.1",
      backups: 0,
      registry: "postgres",
      ...(options.workerBits !== undefined ? { workerBits: options.workerBits } : {}),
      ...(options.statefulSet ? { statefulSet: true } : {}),
      postgres: {
        url,
        password: "",
        ...(options.leaseMs !== undefined ? { leaseMs: options.leaseMs } : {}),
      },
    },
  };
}
