// The published conformance suite, unchanged, against PostgresRegistry on a real PostgreSQL.
import { registryConformance } from "@leaf/conformance/registry";
import { type PostgresHandle, startPostgres, stopAll } from "@leaf/testkit";
import pg from "pg";
import { afterAll, beforeAll, test } from "vitest";
import { createSchema, type PostgresLease, PostgresRegistry } from "../src/index";

let postgres: PostgresHandle;
let db: string;

beforeAll(async () => {
  postgres = await startPostgres();
  db = await postgres.createDatabase("leaf_conf_registry");
  await createSchema(postgres.urlFor(db));
});

afterAll(() => stopAll());

registryConformance(test, {
  name: "registry-postgres",
  create: async () => new PostgresRegistry({ url: postgres.urlFor(db), leaseMs: 10_000 }),
  backups: true,
  requestedWorkerId: true,
  leaseLoss: {
    // The row is handed to another grant behind the holder's back: its next renewal finds out.
    induce: async (lease, { namespace }) => {
      const client = new pg.Client(postgres.connectionOptions(db));
      await client.connect();
      try {
        await client.query(
          "UPDATE leaf_worker_lease SET grant_token = nextval('leaf_worker_lease_grant_seq') " +
            "WHERE leaf_name = $1 AND grant_token = $2",
          [namespace, (lease as PostgresLease).fencingToken.toString()],
        );
      } finally {
        await client.end();
      }
    },
    waitMs: 20_000,
  },
});
