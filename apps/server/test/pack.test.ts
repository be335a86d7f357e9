// The server outside this repository: the packages are packed as they would be published, installed
// with npm into an empty folder, and run from there (`npx @leaf/server`, `leaf decode`). Every
// published package's tarball carries the MIT LICENSE, and npm installs them without an engine
// warning on the Node this runs on (CI: Node 20).
import { execFileSync, spawn, spawnSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freePort } from "@leaf/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

const root = new URL("../../..", import.meta.url).pathname;

/**
 * The server and every @leaf package it depends on, directly or through another (a driver package's
 * shared support package), read from the manifests so that none is missed.
 */
const PACKAGES = serverAndItsPackages();

function serverAndItsPackages(): string[] {
  const manifest = (dir: string) =>
    JSON.parse(readFileSync(join(root, dir, "package.json"), "utf8")) as {
      name: string;
      dependencies?: Record<string, string>;
    };
  const byName = new Map(
    readdirSync(join(root, "packages")).map((d) => [
      manifest(`packages/${d}`).name,
      `packages/${d}`,
    ]),
  );
  const leafDeps = (dir: string) =>
    Object.keys(manifest(dir).dependencies ?? {}).filter((n) => n.startsWith("@leaf/"));
  const dirs = new Set<string>();
  const todo = leafDeps("apps/server");
  for (let name = todo.pop(); name !== undefined; name = todo.pop()) {
    const dir = byName.get(name)!;
    if (dirs.has(dir)) continue;
    dirs.add(dir);
    todo.push(...leafDeps(dir));
  }
  return [...dirs, "apps/server"];
}

/** Every package that is published (not private), whether the server uses it or not. */
const PUBLISHED = [
  ...readdirSync(join(root, "packages")).map((d) => `packages/${d}`),
  "apps/server",
].filter((dir) => !JSON.parse(readFileSync(join(root, dir, "package.json"), "utf8")).private);

let work: string;
let app: string;
let npmWarnings: string;
const tarballContents = new Map<string, string[]>();

beforeAll(() => {
  work = mkdtempSync(join(tmpdir(), "leaf-pack-"));
  const tarballs = join(work, "tarballs");
  app = join(work, "app");
  // Under turbo (`pnpm test`) every package was built before the tests started; building again
  // here would rewrite dist/ while other packages' tests, running beside this one, read it.
  if (process.env.TURBO_HASH === undefined) {
    execFileSync(
      "pnpm",
      ["exec", "turbo", "run", "build", "--filter=@leaf/server...", "--output-logs=errors-only"],
      { cwd: root, stdio: "pipe" },
    );
  }
  for (const dir of PACKAGES) {
    execFileSync("pnpm", ["pack", "--pack-destination", tarballs], {
      cwd: join(root, dir),
      stdio: "pipe",
    });
  }
  execFileSync("mkdir", ["-p", app]);
  writeFileSync(join(app, "package.json"), JSON.stringify({ name: "uses-leaf", private: true }));
  const files = readdirSync(tarballs).map((f) => join(tarballs, f));
  expect(files).toHaveLength(PACKAGES.length);
  // The published packages the server does not use are packed too, only to read their contents.
  const others = join(work, "others");
  for (const dir of PUBLISHED.filter((d) => !PACKAGES.includes(d))) {
    execFileSync("pnpm", ["pack", "--pack-destination", others], {
      cwd: join(root, dir),
      stdio: "pipe",
    });
  }
  for (const file of [...files, ...readdirSync(others).map((f) => join(others, f))]) {
    const listing = execFileSync("tar", ["-tzf", file], { encoding: "utf8" });
    tarballContents.set(file, listing.split("\n").filter(Boolean));
  }
  // Outside the workspace: npm, no pnpm, no links into the repository.
  const npm = spawnSync(
    "npm",
    ["install", "--no-audit", "--no-fund", "--loglevel=warn", ...files],
    {
      cwd: app,
      encoding: "utf8",
    },
  );
  expect(npm.status, npm.stderr).toBe(0);
  npmWarnings = npm.stderr;
}, 600_000);

afterAll(() => {
  if (work) rmSync(work, { recursive: true, force: true });
});

function npx(args: string[]): string {
  return execFileSync("npx", ["--no-install", ...args], { cwd: app, encoding: "utf8" });
}

describe("the published packages", () => {
  it("each carry the MIT LICENSE of the repository", () => {
    expect(tarballContents.size).toBe(PUBLISHED.length);
    const license = readFileSync(join(root, "LICENSE"), "utf8");
    expect(license).toMatch(/^MIT License\n/);
    for (const [file, entries] of tarballContents) {
      expect(entries, file).toContain("package/LICENSE");
      const packed = execFileSync("tar", ["-xzOf", file, "package/LICENSE"], { encoding: "utf8" });
      expect(packed, file).toBe(license);
    }
    for (const dir of PUBLISHED) {
      const manifest = JSON.parse(readFileSync(join(root, dir, "package.json"), "utf8"));
      expect(manifest.license, dir).toBe("MIT");
    }
  });

  it(`install with npm on Node ${process.versions.node} without an engine warning`, () => {
    expect(npmWarnings).not.toMatch(/EBADENGINE/);
  });
});

describe("the published server", () => {
  it("checks a Java Leaf leaf.properties with npx @leaf/server", () => {
    writeFileSync(
      join(app, "leaf.properties"),
      "leaf.name=pack.test\nleaf.segment.enable=false\nleaf.snowflake.enable=true\nleaf.snowflake.zk.address=127.0.0.1:2181\nleaf.snowflake.port=8080\n",
    );
    expect(npx(["@leaf/server", "--check", "--config", "leaf.properties"])).toContain(
      "configuration OK",
    );
  });

  it("decodes an id with the leaf command", () => {
    const out = npx(["leaf", "decode", "1256557484213448722"]);
    expect(out).toContain("2020-05-02T12:13:44.602Z (1588421624602 ms)");
    expect(out).toMatch(/worker id\s+619/);
  });

  it("serves ids with leaf-server and stops on SIGTERM", async () => {
    const port = await freePort();
    const child = spawn(join(app, "node_modules/.bin/leaf-server"), [], {
      cwd: app,
      env: { ...process.env, LEAF_SERVER_PORT: String(port), LEAF_SERVER_DRAIN_MS: "0" },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let output = "";
    child.stdout.setEncoding("utf8").on("data", (c: string) => {
      output += c;
    });
    child.stderr.setEncoding("utf8").on("data", (c: string) => {
      output += c;
    });
    const exited = new Promise<number | null>((resolve) => child.once("exit", resolve));
    try {
      const deadline = Date.now() + 60_000;
      let id: string | undefined;
      while (id === undefined && Date.now() < deadline) {
        id = await fetch(`http://127.0.0.1:${port}/api/segment/get/leaf-segment-test`).then(
          async (r) => (r.ok ? r.text() : undefined),
          () => undefined,
        );
        if (id === undefined) await new Promise((r) => setTimeout(r, 200));
      }
      expect(id, output).toBe("1");
      const snowflake = await fetch(`http://127.0.0.1:${port}/api/snowflake/get/x`);
      expect(await snowflake.text()).toMatch(/^[0-9]{15,19}$/);
    } finally {
      child.kill("SIGTERM");
    }
    expect(await exited, output).toBe(0);
  });
});
