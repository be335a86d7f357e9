// A residue set: segment ranges from several independent databases at once (MySQL and PostgreSQL,
// mixed as you like), database i of N handing out only the ids `id % N === i` (@leaf/segment's
// ResidueSegmentStore), so ids keep coming while any one of them answers. Each database is built
// by the mysql or postgres entry; `leaf-server --form-residue-set` forms the set, or adds the new
// databases listed (N to N+1).
import { configError } from "@leaf/core";
import { formResidueSet, ResidueSegmentStore, type SegmentStore } from "@leaf/segment";
import { def } from "../config-def";
import { boolean, Expected, integer, nonEmpty, table, text } from "../config-readers";
import type { ServerConfig } from "../config-types";
import type { ServiceLogger, StoreMember } from "../service-types";
import type { StoreBackend } from "./backend";
import { type DatabaseKeys, databaseSettings, type ParsedDatabaseUrl } from "./database";
import { MYSQL_EXAMPLE, mysqlUrl, parseMysql } from "./mysql-shared";
import { type MysqlStoreSettings, mysqlStore } from "./mysql-store";
import { POSTGRES_EXAMPLE, parsePostgres, postgresUrl } from "./postgres-shared";
import { type PostgresStoreSettings, postgresStore } from "./postgres-store";

/** Most databases a set lists. */
const MAX_MEMBERS = 64;

/** One database of the set: the settings its own entry (mysql, postgres) builds it from. */
type MemberSettings = MysqlStoreSettings | PostgresStoreSettings;

/** What the residue entry needs of a member's entry, whatever its settings type. */
interface MemberEntry {
  kind: MemberSettings["kind"];
  /** How a member URL of this kind starts. */
  schemes: readonly string[];
  /** The URL checked (the entry's own key reader). */
  read(raw: unknown): string;
  parse(url: string, key: string): ParsedDatabaseUrl;
  example: string;
  describe(settings: MemberSettings): { target: string };
  build(settings: MemberSettings): SegmentStore;
  open(settings: MemberSettings): Promise<SegmentStore>;
}

const MEMBER_ENTRIES: readonly MemberEntry[] = [
  {
    kind: "mysql",
    schemes: ["mysql:", "mariadb:", "jdbc:mysql:", "jdbc:mariadb:"],
    read: mysqlUrl,
    parse: parseMysql,
    example: MYSQL_EXAMPLE,
    describe: (s) => mysqlStore.describe(s as MysqlStoreSettings),
    build: (s) => mysqlStore.build!(s as MysqlStoreSettings),
    open: (s) => mysqlStore.open(s as MysqlStoreSettings, { logger: SILENT }),
  },
  {
    kind: "postgres",
    schemes: ["postgres:", "postgresql:", "jdbc:postgresql:"],
    read: postgresUrl,
    parse: parsePostgres,
    example: POSTGRES_EXAMPLE,
    describe: (s) => postgresStore.describe(s as PostgresStoreSettings),
    build: (s) => postgresStore.build!(s as PostgresStoreSettings),
    open: (s) => postgresStore.open(s as PostgresStoreSettings, { logger: SILENT }),
  },
];

/** The SQL entries log nothing when opened; the form command prints what it does itself. */
const SILENT: ServiceLogger = { info() {}, warn() {}, error() {} };

const memberEntry = (settings: { kind: string }): MemberEntry =>
  MEMBER_ENTRIES.find((e) => e.kind === settings.kind)!;

const entryOfUrl = (url: string): MemberEntry | undefined =>
  MEMBER_ENTRIES.find((e) => e.schemes.some((s) => url.toLowerCase().startsWith(s)));

const MEMBERS_EXPECTED = `1 to ${MAX_MEMBERS} database URLs, one per database of the set, as a list or separated by commas: mysql://user:password@host:3306/leaf, jdbc:mysql://..., postgres://user:password@host:5432/leaf`;

/** A comma (or space) where the next URL starts: a URL's own host list keeps its commas. */
const NEXT_URL = /[\s,]+(?=(?:jdbc:)?[A-Za-z][A-Za-z0-9+.-]*:\/\/)/;

/** Reads a list: a JSON/YAML list, a JSON array in a string, or a string split by `split`. */
function listOf(raw: unknown, split: RegExp | string, expected: string): unknown[] {
  if (Array.isArray(raw)) return raw;
  const t = text(raw);
  if (t === undefined || t === "") throw new Expected(expected);
  if (t.startsWith("[")) {
    try {
      const parsed: unknown = JSON.parse(t);
      if (Array.isArray(parsed)) return parsed;
    } catch {
      // Not JSON: read as written.
    }
    throw new Expected(expected);
  }
  return typeof raw === "string" && split === "," ? raw.split(",") : t.split(split);
}

/** Reads segment.residue.members: every URL checked by its own entry's reader. */
function memberUrls(raw: unknown): string[] {
  const list = listOf(raw, NEXT_URL, MEMBERS_EXPECTED);
  if (list.length === 0 || list.length > MAX_MEMBERS) throw new Expected(MEMBERS_EXPECTED);
  return list.map((item, i) => {
    const url = text(item);
    const entry = url === undefined ? undefined : entryOfUrl(url);
    if (url === undefined || entry === undefined) throw new Expected(MEMBERS_EXPECTED);
    try {
      return entry.read(url);
    } catch (error) {
      const what = error instanceof Expected ? error.expected : MEMBERS_EXPECTED;
      throw new Expected(`${MEMBERS_EXPECTED}; database ${i + 1} is not ${what}`);
    }
  });
}

/** Reads a per-database list of user names or passwords (entries kept as written). */
function perMember(what: string, allowEmpty: boolean) {
  const expected = `${what}, one per database in segment.residue.members order, as a list, a JSON array or separated by commas${allowEmpty ? " (an empty entry: none)" : " (an empty entry: the URL's)"}`;
  return (raw: unknown): string[] => {
    const list = listOf(raw, ",", expected);
    if (list.length === 0 || list.length > MAX_MEMBERS) throw new Expected(expected);
    return list.map((item) => {
      if (typeof item === "number") return String(item);
      if (typeof item !== "string" || item.length > 256) throw new Expected(expected);
      return allowEmpty ? item : item.trim();
    });
  };
}

export const RESIDUE_STORE_KEYS = [
  def("segment.residue.members", {
    type: "database URLs (mysql://, postgres://), a list or comma-separated",
    defaultText: "(none)",
    doc: "The databases of the residue set, in order: the i-th (from 0) of N hands out only ids `id % N === i`, so ids keep coming while any one answers. MySQL and PostgreSQL may be mixed; each holds the same tags in its own `segment.residue.table`. Form the set once with `leaf-server --form-residue-set`; to add a database, append its URL and run it again.",
    secret: true,
    read: memberUrls,
  }),
  def("segment.residue.usernames", {
    type: "user names, one per database",
    defaultText: "each URL's user",
    doc: "Database users, in `segment.residue.members` order (an empty entry takes the URL's).",
    read: perMember("user names", false),
  }),
  def("segment.residue.passwords", {
    type: "passwords, one per database",
    defaultText: "each URL's password; required where the URL has none",
    doc: "Database passwords, in `segment.residue.members` order (an empty entry means no password; a JSON array when a password holds a comma). Without this key every URL must hold its password (`user:@host` for none).",
    secret: true,
    read: perMember("passwords", true),
  }),
  def("segment.residue.table", {
    type: "table name",
    defaultText: "leaf_alloc",
    doc: "Table of tags and max ids in every database of the set (its residue record is in the table named after it with `_residue` appended).",
    read: table,
  }),
  def("segment.residue.createTable", {
    type: "boolean",
    default: false,
    doc: "`--form-residue-set` creates the tables in each database when missing.",
    read: boolean,
  }),
  def("segment.residue.hedgeMs", {
    type: "1 to 60,000",
    default: 1000,
    doc: "How long a range request waits for one database before asking the next too; a database with a call unanswered for longer (a paused or cut-off server) is skipped until it answers.",
    read: integer(1, 60_000),
  }),
  def("segment.residue.setId", {
    type: "string",
    defaultText: "the set id of the first database that answers",
    doc: "The set id `--form-residue-set` printed: a database of another set is refused.",
    read: nonEmpty("the set id --form-residue-set printed", 64),
  }),
] as const;

/** The residue set's settings. */
export interface ResidueStoreSettings {
  kind: "residue";
  members: MemberSettings[];
  table: string | undefined;
  createTable: boolean;
  hedgeMs: number;
  setId: string | undefined;
}

const KEYS: DatabaseKeys = {
  url: "segment.residue.members",
  user: "segment.residue.usernames",
  password: "segment.residue.passwords",
};

/** A database's name in messages, metrics and the monitor: its address without secrets. */
const nameOf = (m: MemberSettings): string => memberEntry(m).describe(m).target;

export const residueStore: StoreBackend<
  "residue",
  ResidueStoreSettings,
  typeof RESIDUE_STORE_KEYS
> = {
  kind: "residue",
  keys: RESIDUE_STORE_KEYS,
  addressKeys: ["segment.residue.members"],
  shared: true,
  settings(v) {
    const urls = v.optional("segment.residue.members");
    if (urls === undefined) {
      if (!v.named("segment.residue.members")) {
        v.missing(
          "segment.residue.members",
          "segment.store is residue, so the URLs of the set's databases are needed",
        );
      }
      return undefined;
    }
    const users = v.optional("segment.residue.usernames");
    const passwords = v.optional("segment.residue.passwords");
    let ok = true;
    for (const [key, list] of [
      ["segment.residue.usernames", users],
      ["segment.residue.passwords", passwords],
    ] as const) {
      if (list !== undefined && list.length !== urls.length) {
        v.problem(
          key,
          `invalid ${v.label(key)}: ${list.length} entries for the ${urls.length} databases of ${v.label("segment.residue.members")}; give one per database, in the same order`,
        );
        ok = false;
      }
    }
    const tableName = v.optional("segment.residue.table");
    const members: MemberSettings[] = [];
    urls.forEach((url, i) => {
      const entry = entryOfUrl(url)!;
      const database = databaseSettings(
        v,
        {
          url,
          user: users?.[i] || undefined,
          password: passwords?.[i],
          which: `database ${i + 1}`,
        },
        KEYS,
        entry,
      );
      if (database) {
        members.push({ kind: entry.kind, ...database, table: tableName } as MemberSettings);
      } else ok = false;
    });
    if (!ok) return undefined;
    const names = members.map(nameOf);
    const twice = names.find((name, i) => names.indexOf(name) !== i);
    if (twice !== undefined) {
      v.problem(
        "segment.residue.members",
        `invalid ${v.label("segment.residue.members")}: it lists ${twice} twice; list each database of the set once`,
      );
      return undefined;
    }
    return {
      kind: "residue",
      members,
      table: tableName,
      createTable: v.get("segment.residue.createTable"),
      hedgeMs: v.get("segment.residue.hedgeMs"),
      setId: v.optional("segment.residue.setId"),
    };
  },
  async open(settings, { logger }) {
    // Built without connecting: a database down at start joins once it answers. The start waits
    // for one database to be verified (and for the others up to a few seconds).
    const store = new ResidueSegmentStore({
      members: settings.members.map((m) => memberEntry(m).build(m)),
      names: settings.members.map(nameOf),
      setId: settings.setId,
      hedgeMs: settings.hedgeMs,
      onMemberError: (error, c) => {
        const fields = { err: error, member: c.member, operation: c.operation, tag: c.tag };
        const what = `residue set database ${c.member}: ${c.operation} failed${c.tag ? ` for tag ${c.tag}` : ""}`;
        if (c.level === "error") {
          logger.error(fields, `${what}; it gets no range until an operator fixes it`);
        } else logger.warn(fields, `${what}; the other databases serve, it is asked again later`);
      },
    });
    try {
      await store.start();
    } catch (error) {
      await store.close().catch(() => {});
      throw error;
    }
    return store;
  },
  // No high-water marks: the databases' ranges interleave, which one mark per tag cannot judge
  // (the generator refuses them); each database's max id is checked by its own store.
  storeId: () => undefined,
  members: (store) => (store instanceof ResidueSegmentStore ? store.status().map(memberOf) : []),
  describe: (settings) => ({
    kind: "residue",
    mode: "",
    target: settings.members.map((m) => `${m.kind} ${nameOf(m)}`).join(", "),
    shared: true,
  }),
};

function memberOf(s: ReturnType<ResidueSegmentStore["status"]>[number]): StoreMember {
  return {
    name: s.name,
    kind: s.kind,
    up: s.state === "serving" && s.lastError === null,
    state: s.state,
    delta: s.delta,
    remainder: s.remainder,
    epoch: s.epoch,
    rangesTaken: s.rangesTaken,
    failures: s.failures,
    lastError: s.lastError,
  };
}

/**
 * `leaf-server --form-residue-set`: forms the residue set of segment.residue.members (every
 * database must answer), or adds the databases listed after the set's own (N to N+1), with
 * @leaf/segment's formResidueSet; prints each step and the outcome. Exit code 0 when done.
 */
export async function formResidueSetCommand(
  config: ServerConfig,
  print: (line: string) => void = (line) => console.log(line),
): Promise<number> {
  const settings = config.segment?.backend;
  if (settings?.kind !== "residue") {
    throw configError(
      "server",
      "segment.store",
      config.segment?.store ?? "(segment mode off)",
      "residue: --form-residue-set forms the databases listed in segment.residue.members",
    );
  }
  const names = settings.members.map(nameOf);
  // Opened by their own entries: each database must answer, its table there (or created).
  const opened = await Promise.allSettled(
    settings.members.map((m) => memberEntry(m).open({ ...m, createTable: settings.createTable })),
  );
  const stores = opened.flatMap((o) => (o.status === "fulfilled" ? [o.value] : []));
  try {
    const failed = opened.flatMap((o, i) =>
      o.status === "rejected" ? [`${names[i]}: ${(o.reason as Error).message}`] : [],
    );
    if (failed.length > 0) {
      throw configError(
        "server",
        "segment.residue.members",
        names,
        `databases that all answer, writable, with their tables (segment.residue.createTable creates them); nothing was changed: ${failed.join("; ")}`,
      );
    }
    const report = await formResidueSet(stores, {
      names,
      onProgress: (message) => print(`  ${message}`),
    });
    if (report.unchanged) {
      print(
        `The residue set ${report.setId} is formed as listed (epoch ${report.epoch}): nothing to do.`,
      );
    } else {
      print(`Formed the residue set ${report.setId}, epoch ${report.epoch}:`);
    }
    for (const m of report.members) {
      print(`  ${m.name}: ids with id % ${report.members.length} = ${m.remainder}`);
    }
    for (const [tag, at] of report.startsAt)
      print(`  tag ${tag}: every database's ranges start at or above ${at}`);
    print(`Pin it with segment.residue.setId=${report.setId}`);
    return 0;
  } finally {
    await Promise.allSettled(stores.map((s) => s.close()));
  }
}
