// The README examples of the repository: every ```ts / ```js block of the root README and of each
// package's README, with what it needs to run. One list for every runner: chaos's
// test/readme-examples.test.ts runs them with tsx on Node, the runtime matrix under Bun and Deno.
//
// A block says how it runs in an HTML comment on the line just above its fence (GitHub shows none):
//
//   <!-- example: runs -->                         a whole program, run as is
//   <!-- example: runs with redis, mysql -->       the same, with these services (see SERVICE_ENV)
//   <!-- example: not run: <why> -->               a fragment, a test file, or infrastructure no
//                                                   runner starts (the reason is printed)
//
// A block without such a comment is reported as unmarked (`status: "unmarked"`): runners fail on
// it, so that a new example cannot be left out silently.
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

/** The repository's root folder. */
export const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");

/**
 * Services an example may need, and the environment variable its code reads the URL from (each
 * example falls back to a placeholder address, so that it also reads as plain documentation).
 */
export const SERVICE_ENV = Object.freeze({
  mysql: "LEAF_MYSQL_URL",
  postgres: "LEAF_PG_URL",
  redis: "LEAF_REDIS_URL",
  zookeeper: "LEAF_ZK_URL",
  etcd: "LEAF_ETCD_URL",
});

const FENCE = /^```(ts|typescript|js|javascript|mjs)[^\S\n]*\n([\s\S]*?)^```[^\S\n]*$/gm;
const MARK = /^<!--\s*example:\s*(runs(?:\s+with\s+([a-z,\s]+?))?|not run:\s*([\s\S]+?))\s*-->$/;

/**
 * @typedef {object} ReadmeExample
 * @property {string} file      README path relative to the root ("packages/core/README.md")
 * @property {number} line      line of the opening fence (1-based)
 * @property {string} name      "packages/core/README.md:13"
 * @property {string} lang      the fence's language ("ts", "js", ...)
 * @property {string} code      the block's text, verbatim
 * @property {"runs" | "not-run" | "unmarked"} status
 * @property {string[]} services  for "runs": the services it needs (keys of SERVICE_ENV)
 * @property {string | undefined} reason  for "not-run": why; for "unmarked": what to add
 */

/** The README files: the root's, then each folder's under packages/ and apps/ that has one. */
export function readmeFiles(root = ROOT) {
  const files = ["README.md"];
  for (const parent of ["packages", "apps"]) {
    for (const dir of readdirSync(join(root, parent)).sort()) {
      try {
        readFileSync(join(root, parent, dir, "README.md"));
        files.push(`${parent}/${dir}/README.md`);
      } catch {
        // no README in this folder
      }
    }
  }
  return files;
}

/** The examples of one README's text; `file` names it in the results. */
export function extractExamples(markdown, file) {
  const examples = [];
  for (const match of markdown.matchAll(FENCE)) {
    const before = markdown.slice(0, match.index);
    const line = before.split("\n").length;
    const above = before.trimEnd().split("\n").at(-1)?.trim() ?? "";
    const mark = MARK.exec(above);
    const example = {
      file,
      line,
      name: `${file}:${line}`,
      lang: match[1],
      code: match[2],
      status: "unmarked",
      services: [],
      reason:
        'no "<!-- example: runs -->" or "<!-- example: not run: why -->" line above the block',
    };
    if (mark?.[1].startsWith("runs")) {
      const services = (mark[2] ?? "").split(/[,\s]+/).filter(Boolean);
      const unknown = services.filter((s) => !(s in SERVICE_ENV));
      if (unknown.length > 0) {
        example.reason = `unknown service(s) ${unknown.join(", ")}; known: ${Object.keys(SERVICE_ENV).join(", ")}`;
      } else {
        Object.assign(example, { status: "runs", services, reason: undefined });
      }
    } else if (mark?.[3]) {
      Object.assign(example, { status: "not-run", reason: mark[3].replace(/\s+/g, " ") });
    }
    examples.push(example);
  }
  return examples;
}

/** What an example opens that holds a connection, a timer, a lock or an id until closed. */
const OPENS =
  /\bconst\s+(\w+)\s*=\s*(?:await\s+)?(?:new\s+(?:SnowflakeWorker|SegmentIdGenerator|CachedSnowflakeGenerator|RedisSequence|LeafClient|\w+Registry|\w+SegmentStore)\b|startServer\(|acquireLockFile\()/g;

/**
 * The names an example's code opens (a worker, generator, registry, store, client, server or lock
 * assigned to a const) and never closes or releases (`name.close(` / `name.release(`): a newcomer
 * copying it would leak it. A store passed to a generator is closed by the generator's close().
 */
export function unclosedNames(code) {
  const names = [...code.matchAll(OPENS)].map((m) => m[1]);
  const closes = (name) => new RegExp(`\\b${name}\\.(close|release)\\(`).test(code);
  // `new SegmentIdGenerator({ store })` or `({ store: name })`: closed with the generator.
  const generator = /\bconst\s+(\w+)\s*=\s*new\s+SegmentIdGenerator\(\{([^}]*)\}/.exec(code);
  const storeOfGenerator = generator && /\bstore(?:\s*:\s*(\w+))?/.exec(generator[2]);
  const ownedStore = storeOfGenerator && (storeOfGenerator[1] ?? "store");
  return names.filter((name) => !closes(name) && !(name === ownedStore && closes(generator[1])));
}

/** Every example of every README (see readmeFiles), in file order. */
export function readmeExamples(root = ROOT) {
  return readmeFiles(root).flatMap((file) =>
    extractExamples(readFileSync(join(root, file), "utf8"), file),
  );
}

// `node scripts/readme-examples.mjs`: lists the examples and how each runs.
if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  for (const e of readmeExamples()) {
    const how =
      e.status === "runs"
        ? `runs${e.services.length > 0 ? ` with ${e.services.join(", ")}` : ""}`
        : `${e.status}: ${e.reason}`;
    console.log(`${e.name.padEnd(40)} ${how}`);
  }
}
