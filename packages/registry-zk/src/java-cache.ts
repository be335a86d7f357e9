// Java Leaf's local cache file, read by a node migrating from Java Leaf when ZooKeeper is down at
// start and this package's own cache file does not exist yet. SnowflakeZookeeperHolder writes
// `{java.io.tmpdir}/{leaf.name}/leafconf/{port}/workerID.properties` holding `workerID=N` (no
// timestamp, no ip) each time it starts with ZooKeeper reachable, and reads it back with
// java.util.Properties when ZooKeeper is not.
import { readFileSync, statSync } from "node:fs";
import { ErrorCodes, LeafError } from "@leaf/core";
import { COMPONENT } from "./options";

/** What Java Leaf's file tells: the worker id, and when the file was last written (its mtime). */
export interface JavaCachedId {
  workerId: number;
  /** The file's modification time, ms since the epoch, rounded down. */
  writtenAt: number;
}

/**
 * Reads Java Leaf's `workerID.properties` at `path`; undefined when there is no such file.
 * Accepts what Java Leaf writes (`workerID=N`) and what java.util.Properties reads for it
 * (`workerID = N`, `workerID:N`, `workerID N`, comment and blank lines); anything else, or a
 * second `workerID` line, is CORRUPT_DATA naming the file and the text seen.
 */
export function readJavaLeafCache(path: string): JavaCachedId | undefined {
  let text: string;
  let mtimeMs: number;
  try {
    text = readFileSync(path, "utf8");
    mtimeMs = statSync(path).mtimeMs;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw new LeafError({
      component: COMPONENT,
      code: ErrorCodes.CORRUPT_DATA,
      message: `Java Leaf's cache file ${path} cannot be read: ${(error as Error).message}; fix its permissions or delete it`,
      details: { path },
      cause: error,
    });
  }
  const corrupt = (what: string) =>
    new LeafError({
      component: COMPONENT,
      code: ErrorCodes.CORRUPT_DATA,
      message: `Java Leaf's cache file ${path} is not usable: ${what}; expected one line "workerID=N" as Java Leaf writes it. Delete it or fix it`,
      details: { path, text: text.slice(0, 200) },
    });
  const lines = text
    .split(/\r\n|\r|\n/)
    .map((line) => line.trim())
    .filter((line) => line !== "" && !line.startsWith("#") && !line.startsWith("!"));
  if (lines.length !== 1) {
    throw corrupt(`${lines.length} entries found (${JSON.stringify(lines.slice(0, 3))})`);
  }
  const match = /^workerID(?:\s*[=:]\s*|\s+)(.*)$/.exec(lines[0]!);
  if (!match) throw corrupt(`the entry ${JSON.stringify(lines[0])} is not workerID`);
  const value = match[1]!;
  if (!/^\d{1,10}$/.test(value) || !Number.isSafeInteger(Number(value))) {
    throw corrupt(`workerID ${JSON.stringify(value)} is not a non-negative integer`);
  }
  return { workerId: Number(value), writtenAt: Math.floor(mtimeMs) };
}
