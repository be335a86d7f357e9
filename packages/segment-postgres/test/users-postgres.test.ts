// Stores of one deployment that log in as different users, on a PostgreSQL that checks passwords,
// while one user owns a schema named after it holding tables of the same names: the default
// search_path ("$user", public) would find that user's tables first. An unqualified table is
// public's, and so are its deleted tags' and residue tables: both users take ranges from one row
// (every id counted), see each other's deleted tags and residue record.
import { ErrorCodes, isLeafError } from "@leaf/core";
import type { ResidueRecord } from "@leaf/segment";
import { countDuplicates, type PostgresHandle, startPostgres } from "@leaf/testkit";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createSchema, PostgresSegmentStore, residueSchema } from "../src/index";

let db: PostgresHandle;
let database: string;
const USERS = { reguser: "NewPw", leafuser: "right" };
const TABLES = ["leaf_alloc", "leaf_alloc_deleted", "leaf_alloc_residue"];

beforeAll(async () => {
  db = await startPostgres({ checkPasswords: true });
  database = await db.createDatabase("segment_users");
  await createSchema({ url: db.urlFor(database) });
  const statements = [residueSchema()];
  for (const [user, password] of Object.entries(USERS)) {
    statements.push(
      `CREATE ROLE ${user} LOGIN PASSWORD '${password}'`,
      `GRANT SELECT, INSERT, UPDATE, DELETE ON ${TABLES.map((t) => `public.${t}`).join(", ")} TO ${user}`,
    );
  }
  // reguser's own schema, with tables of the same names (and the same tag) as public's.
  statements.push("CREATE SCHEMA reguser AUTHORIZATION reguser");
  for (const table of TABLES) {
    statements.push(
      `CREATE TABLE reguser.${table} (LIKE public.${table} INCLUDING ALL)`,
      `ALTER TABLE reguser.${table} OWNER TO reguser`,
    );
  }
  for (const schema of ["public", "reguser"]) {
    statements.push(
      `INSERT INTO ${schema}.leaf_alloc (biz_tag, max_id, step) VALUES ('users', 1, 1000), ('gone', 1, 1000)`,
    );
  }
  const client = new pg.Client(db.connectionOptions(database));
  await client.connect();
  try {
    for (const statement of statements) await client.query(statement);
  } finally {
    await client.end();
  }
}, 120_000);

afterAll(async () => {
  await db?.dispose();
});

/** A store logging in as `user` with its password, on the default table. */
function storeAs(user: keyof typeof USERS): PostgresSegmentStore {
  return new PostgresSegmentStore({
    url: `postgres://${user}:${USERS[user]}@${db.host}:${db.port}/${database}`,
  });
}

const record: ResidueRecord = {
  setId: "set-users",
  memberId: "member-1",
  epoch: 0,
  delta: 2,
  remainder: 0,
  state: "joining",
  version: 1,
  members: ["member-1", "member-2"],
};

describe("PostgresSegmentStore for users with a schema of their own", () => {
  const stores: PostgresSegmentStore[] = [];

  beforeAll(() => {
    stores.push(storeAs("reguser"), storeAs("leafuser"));
  });

  afterAll(async () => {
    for (const store of stores) await store.close();
  });

  it("takes every range of a tag from public's row, whichever user logs in: no id twice", async () => {
    const ids: bigint[][] = [[], []];
    for (let round = 0; round < 10; round++) {
      for (const [n, store] of stores.entries()) {
        const range = await store.takeRange("users");
        for (let id = range.start; id < range.end; id++) ids[n]!.push(id);
      }
    }
    const counted = countDuplicates(ids);
    expect(counted.total).toBe(20_000);
    expect(counted.duplicates, `${counted.duplicates} of ${counted.total} ids issued twice`).toBe(
      0,
    );
  });

  it("refuses to create again, through one user, a tag deleted through the other below its max id", async () => {
    const [reg, leaf] = stores;
    await reg!.takeRange("gone");
    const deleted = await reg!.deleteTag("gone");
    expect(deleted?.maxId).toBe(1001n);
    const error = await leaf!
      .createTag({ tag: "gone", startId: 1n, step: 1000 })
      .catch((e: unknown) => e);
    expect(isLeafError(error, ErrorCodes.ALREADY_EXISTS)).toBe(true);
    // Refused for the deleted tag's max id, not for a row of another table holding the tag.
    expect(isLeafError(error) && error.details).toMatchObject({
      reason: "deleted",
      minStartId: "1001",
    });
  });

  it("reads, through one user, the residue record written through the other", async () => {
    const [reg, leaf] = stores;
    expect(await leaf!.writeResidue(record, null)).toBe(true);
    expect(await reg!.readResidue()).toEqual(record);
  });
});
