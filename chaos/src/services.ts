// The stores the servers use, started once per run by the test kit as private servers (never the
// LEAF_TEST_* ones: the suite breaks them): MariaDB, ZooKeeper, Redis; and segment tags in MariaDB.
import { type Layout, layouts } from "@leaf/core";
import type { TagRecord } from "@leaf/segment";
import { createSchema, MysqlSegmentStore } from "@leaf/segment-mysql";
import {
  type MysqlHandle,
  type RedisHandle,
  startMysql,
  startRedis,
  startZookeeper,
  type ZookeeperHandle,
} from "@leaf/testkit";

/** Which stores a run needs. */
export interface ServiceNeeds {
  mysql?: boolean;
  zookeeper?: boolean;
  redis?: boolean;
}

/** ZooKeeper session timeout the servers ask for (the registry's default). */
export const ZK_SESSION_TIMEOUT_MS = 6000;

/** A database holding segment tags, as the servers reach it. */
export interface SegmentDatabase {
  database: string;
  /** URL for the servers, straight to MariaDB. */
  url: string;
  /** The same database through another port (a proxy). */
  urlVia(port: number): string;
  /** Every tag as stored now. */
  describe(): Promise<TagRecord[]>;
  /** The stored max id of `tag` now (one past the last id of every range handed out). */
  maxId(tag: string): Promise<bigint>;
  close(): Promise<void>;
}

/** The running stores. */
export class Services {
  private constructor(
    readonly mysql: MysqlHandle | undefined,
    readonly zookeeper: ZookeeperHandle | undefined,
    readonly redis: RedisHandle | undefined,
  ) {}

  /** Starts the stores `needs` names, in parallel. */
  static async start(needs: ServiceNeeds): Promise<Services> {
    const [mysql, zookeeper, redis] = await Promise.all([
      needs.mysql ? startMysql({ useEnv: false }) : undefined,
      needs.zookeeper ? startZookeeper({ useEnv: false }) : undefined,
      needs.redis ? startRedis({ useEnv: false }) : undefined,
    ]);
    return new Services(mysql, zookeeper, redis);
  }

  /** MariaDB, or an error saying the run did not start it. */
  requireMysql(): MysqlHandle {
    if (!this.mysql) throw new Error("[leaf] [chaos] this run did not start MariaDB");
    return this.mysql;
  }

  /** ZooKeeper, or an error saying the run did not start it. */
  requireZookeeper(): ZookeeperHandle {
    if (!this.zookeeper) throw new Error("[leaf] [chaos] this run did not start ZooKeeper");
    return this.zookeeper;
  }

  /** Redis, or an error saying the run did not start it. */
  requireRedis(): RedisHandle {
    if (!this.redis) throw new Error("[leaf] [chaos] this run did not start Redis");
    return this.redis;
  }

  /** A new database with the leaf_alloc table and `tags` in it (each starting at id 1). */
  segmentDatabase(tags: Array<{ tag: string; step: number }>): Promise<SegmentDatabase> {
    return segmentDatabaseOn(this.requireMysql(), tags);
  }

  /** Stops every store and removes its folder. */
  async dispose(): Promise<void> {
    await Promise.all([this.mysql?.dispose(), this.zookeeper?.dispose(), this.redis?.dispose()]);
  }
}

/**
 * A new database on `mysql` with the leaf_alloc table and `tags` in it (each starting at id 1). The
 * servers' URL is `url` unless `serversUrl` names other hosts (a primary and its replica).
 */
export async function segmentDatabaseOn(
  mysql: MysqlHandle,
  tags: Array<{ tag: string; step: number }>,
  serversUrl?: (database: string) => string,
): Promise<SegmentDatabase> {
  const database = await mysql.createDatabase("leaf_chaos");
  const url = mysql.urlFor(database);
  const options = { url, user: mysql.user, password: mysql.password ?? "" };
  await createSchema(options);
  const store = new MysqlSegmentStore(options);
  for (const { tag, step } of tags) {
    await store.createTag({ tag, step, description: "chaos suite" });
  }
  return {
    database,
    url: serversUrl?.(database) ?? url,
    urlVia: (port) => `mysql://${mysql.user}@127.0.0.1:${port}/${database}`,
    describe: () => store.describeTags(),
    async maxId(tag) {
      const row = (await store.describeTags()).find((r) => r.tag === tag);
      if (!row) throw new Error(`[leaf] [chaos] tag ${tag} is missing from ${database}`);
      return row.maxId;
    },
    close: () => store.close(),
  };
}

/** The snowflake layout the servers use (their default). */
export const SNOWFLAKE_LAYOUT: Layout = layouts.leaf;
