// Data-folder templates: a database's own setup program (mariadb-install-db, initdb) takes most of
// a second, copying its result ~50 ms, so one template per machine is built once (under a lock, so
// parallel test processes build it once) and each instance gets a copy.
import { existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { cp, mkdtemp, rename, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { forgetDir, removeDirSync, watchDir } from "./cleanup";
import { TEMP_PREFIX } from "./handle";
import { runProgram } from "./run-program";

const TEMPLATE_MARKER = ".leaf-testkit-template";
/** A lock older than this is from a process that hung; it is taken over. */
const STALE_LOCK_MS = 120_000;

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** Takes the lock folder, waiting while a live process holds it; stale locks are taken over. */
async function takeLock(lock: string, done: () => boolean): Promise<boolean> {
  for (;;) {
    if (done()) return false;
    try {
      mkdirSync(lock);
      writeFileSync(join(lock, "pid"), String(process.pid));
      watchDir(lock);
      return true;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
    }
    let stale = false;
    try {
      const age = Date.now() - statSync(lock).mtimeMs;
      const holder = Number(readFileSync(join(lock, "pid"), "utf8"));
      stale = age > STALE_LOCK_MS || (holder > 0 && !pidAlive(holder));
    } catch {
      // The pid file is not written yet, or the lock was just released: look again shortly.
    }
    if (stale) removeDirSync(lock);
    else await sleep(100);
  }
}

/**
 * The template data folder `$TMPDIR/leaf-testkit-<name>-template-<key>`, built on first use by
 * `build(datadir)`, which must create `datadir` (inside a staging folder). A new build is renamed
 * into place once complete, so a reader never sees half a template. `key` names what the contents
 * depend on (program, version, arguments): a different key builds a different template.
 */
export async function templateFolder(
  name: string,
  key: string,
  build: (datadir: string) => Promise<void>,
): Promise<string> {
  const template = join(tmpdir(), `${TEMP_PREFIX}${name}-template-${key}`);
  const ready = () => existsSync(join(template, TEMPLATE_MARKER));
  if (ready()) return template;

  const lock = `${template}.lock`;
  if (!(await takeLock(lock, ready))) return template;
  let staging: string | undefined;
  try {
    if (ready()) return template;
    staging = await mkdtemp(join(tmpdir(), `${TEMP_PREFIX}${name}-template-build-`));
    watchDir(staging);
    const datadir = join(staging, "data");
    await build(datadir);
    writeFileSync(join(datadir, TEMPLATE_MARKER), `${name}\n`);
    // A folder left without its marker (a build killed mid-rename) is replaced.
    await rm(template, { recursive: true, force: true });
    await rename(datadir, template);
    return template;
  } finally {
    if (staging !== undefined) {
      await rm(staging, { recursive: true, force: true });
      forgetDir(staging);
    }
    removeDirSync(lock);
    forgetDir(lock);
  }
}

/**
 * Copies a template with the system's cp, keeping owners and modes (about twice as fast as fs.cp
 * on a data folder's many small files), falling back to fs.cp where there is none.
 */
export async function copyTemplate(template: string, datadir: string): Promise<void> {
  const result = await runProgram("cp", ["-a", template, datadir]).catch(() => undefined);
  if (result?.code === 0) return;
  await rm(datadir, { recursive: true, force: true });
  await cp(template, datadir, { recursive: true });
}
