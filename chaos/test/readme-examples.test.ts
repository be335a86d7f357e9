// Every README example, run verbatim as a newcomer would: the block saved as index.ts in an empty
// ESM package ("type": "module") whose node_modules point at this repository's built packages, run
// with tsx, with the services the block names started by the test kit and their URLs in the
// variables it reads (scripts/readme-examples.mjs). An example passes when it closes what it opens
// (no worker, generator, registry, client, server or lock left open in its code) and exits 0 on its
// own: one that leaves a connection or timer open never exits, and fails here.
import { spawn } from "node:child_process";
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  realpathSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import {
  startEtcd,
  startMysql,
  startPostgres,
  startRedis,
  startZookeeper,
  stopAll,
} from "@leaf/testkit";
import { afterAll, describe, expect, it } from "vitest";
import {
  type ExampleService,
  type ReadmeExample,
  ROOT,
  readmeExamples,
  SERVICE_ENV,
  unclosedNames,
} from "../../scripts/readme-examples.mjs";

const examples = readmeExamples();
const folders: string[] = [];
afterAll(async () => {
  for (const dir of folders) rmSync(dir, { recursive: true, force: true });
  await stopAll();
});

/** The URL of each service, started on first need and shared by the examples. */
const services = new Map<ExampleService, Promise<string>>();
function serviceUrl(service: ExampleService): Promise<string> {
  let url = services.get(service);
  if (!url) {
    url = (async () => {
      switch (service) {
        case "mysql": {
          const mysql = await startMysql();
          return mysql.urlFor(await mysql.createDatabase("readme"));
        }
        case "postgres": {
          const postgres = await startPostgres();
          return postgres.urlFor(await postgres.createDatabase("readme"));
        }
        case "redis":
          return (await startRedis()).url;
        case "zookeeper":
          return (await startZookeeper()).connectString;
        case "etcd":
          return (await startEtcd()).url;
      }
    })();
    services.set(service, url);
  }
  return url;
}

/** Every workspace package by name, and the folders whose node_modules hold third-party modules. */
const workspace = new Map<string, string>();
const moduleFolders = [join(ROOT, "node_modules")];
for (const parent of ["packages", "apps"]) {
  for (const dir of readdirSync(join(ROOT, parent))) {
    const manifest = join(ROOT, parent, dir, "package.json");
    if (!existsSync(manifest)) continue;
    workspace.set(JSON.parse(readFileSync(manifest, "utf8")).name, join(ROOT, parent, dir));
    moduleFolders.push(join(ROOT, parent, dir, "node_modules"));
  }
}

/** An empty ESM package holding the example as index.ts, its imports linked to this repository. */
function examplePackage(example: ReadmeExample): string {
  const dir = mkdtempSync(join(tmpdir(), "leaf-readme-example-"));
  folders.push(dir);
  writeFileSync(join(dir, "package.json"), JSON.stringify({ type: "module", private: true }));
  writeFileSync(join(dir, "index.ts"), example.code);
  const specifiers = [...example.code.matchAll(/^import\b[^;]*?\bfrom\s+"([^"]+)"/gm)].map(
    (m) => m[1]!,
  );
  for (const specifier of specifiers) {
    if (specifier.startsWith("node:") || specifier.startsWith(".")) continue;
    const name = specifier
      .split("/")
      .slice(0, specifier.startsWith("@") ? 2 : 1)
      .join("/");
    const target =
      workspace.get(name) ??
      moduleFolders.map((f) => join(f, name)).find((candidate) => existsSync(candidate));
    if (!target) throw new Error(`${example.name} imports ${name}, found nowhere in the workspace`);
    const link = join(dir, "node_modules", name);
    if (existsSync(link)) continue;
    mkdirSync(dirname(link), { recursive: true });
    symlinkSync(realpathSync(target), link, "dir");
  }
  return dir;
}

interface Run {
  code: number | null;
  output: string;
  timedOut: boolean;
}

/** Runs index.ts in `dir` with tsx; a run that has not exited after `timeoutMs` is killed. */
function runExample(dir: string, env: Record<string, string>, timeoutMs = 60_000): Promise<Run> {
  const tsx = join(ROOT, "node_modules", ".bin", "tsx");
  return new Promise((resolve) => {
    const child = spawn(tsx, ["index.ts"], { cwd: dir, env: { ...process.env, ...env } });
    let output = "";
    child.stdout.on("data", (chunk) => {
      output += chunk;
    });
    child.stderr.on("data", (chunk) => {
      output += chunk;
    });
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill("SIGKILL");
    }, timeoutMs);
    child.on("exit", (code) => {
      clearTimeout(timer);
      resolve({ code, output, timedOut });
    });
  });
}

async function environment(example: ReadmeExample): Promise<Record<string, string>> {
  const env: Record<string, string> = {};
  for (const service of example.services) env[SERVICE_ENV[service]] = await serviceUrl(service);
  return env;
}

/** Asserts a run exited 0 on its own, showing its output otherwise. */
function expectClean(example: ReadmeExample, run: Run): void {
  const why = run.timedOut
    ? "did not exit within 60 s: something it opened is still open"
    : `exited with ${run.code}`;
  expect(run.code === 0 && !run.timedOut, `${example.name} ${why}:\n${run.output}`).toBe(true);
}

describe("README examples", () => {
  it("say whether they run: every ts/js block is marked, and a block not run says why", () => {
    expect(examples.length).toBeGreaterThan(20);
    expect(examples.filter((e) => e.status === "unmarked").map((e) => e.name)).toEqual([]);
    for (const e of examples.filter((x) => x.status === "not-run")) {
      console.log(`not run: ${e.name}: ${e.reason}`);
    }
  });

  for (const example of examples.filter((e) => e.status === "runs")) {
    const needs = example.services.length > 0 ? ` with ${example.services.join(", ")}` : "";
    it(`${example.name} runs verbatim${needs}, closes what it opens and exits on its own`, async () => {
      expect(unclosedNames(example.code), `${example.name} opens and never closes`).toEqual([]);
      const dir = examplePackage(example);
      const run = await runExample(dir, await environment(example));
      expectClean(example, run);
      if (example.file === "README.md") {
        // The first example: run again in the same folder, as a newcomer does, it continues where
        // the first run stopped (the generator gave its unused range back; no range is skipped).
        expect(run.output.split("\n")[0]).toBe("1n");
        const again = await runExample(dir, {});
        expectClean(example, again);
        expect(again.output.split("\n")[0]).toBe("2n");
        // The worker's last timestamp was written at close (the next start checks its clock).
        const cache = JSON.parse(
          readFileSync(join(dir, "leaf-data/registry/orders/worker-1.json"), "utf8"),
        );
        expect(cache.timestamp).toBeGreaterThan(0);
      }
    }, 180_000);
  }
});
