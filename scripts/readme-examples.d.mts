// Types of readme-examples.mjs, for the TypeScript tests that import it.

/** The repository's root folder. */
export declare const ROOT: string;

/** Services an example may need, and the environment variable its code reads the URL from. */
export declare const SERVICE_ENV: Readonly<{
  mysql: "LEAF_MYSQL_URL";
  postgres: "LEAF_PG_URL";
  redis: "LEAF_REDIS_URL";
  zookeeper: "LEAF_ZK_URL";
  etcd: "LEAF_ETCD_URL";
}>;

export type ExampleService = keyof typeof SERVICE_ENV;

/** One ```ts / ```js block of a README and how it runs. */
export interface ReadmeExample {
  /** README path relative to the root ("packages/core/README.md"). */
  file: string;
  /** Line of the opening fence (1-based). */
  line: number;
  /** "packages/core/README.md:13" */
  name: string;
  /** The fence's language ("ts", "js", ...). */
  lang: string;
  /** The block's text, verbatim. */
  code: string;
  status: "runs" | "not-run" | "unmarked";
  /** For "runs": the services it needs. */
  services: ExampleService[];
  /** For "not-run": why; for "unmarked": what to add. */
  reason: string | undefined;
}

/** The README files: the root's, then each folder's under packages/ and apps/ that has one. */
export declare function readmeFiles(root?: string): string[];
/** The examples of one README's text; `file` names it in the results. */
export declare function extractExamples(markdown: string, file: string): ReadmeExample[];
/** Every example of every README, in file order. */
export declare function readmeExamples(root?: string): ReadmeExample[];
/**
 * The names an example's code opens (a worker, generator, registry, store, client, server or lock
 * assigned to a const) and never closes or releases; a store passed to a closed generator counts
 * as closed.
 */
export declare function unclosedNames(code: string): string[];
