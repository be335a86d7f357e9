// Test helpers: a plain node-zookeeper-client session standing for an operator, another program
// (Java Leaf) or a crashed node, with promise wrappers; and registry options for tests.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type { NodeIdentity } from "@leaf/core";
import { startZookeeper, type ZookeeperHandle } from "@leaf/testkit";
import zookeeper from "node-zookeeper-client";
import { afterAll, beforeAll } from "vitest";
import { ZookeeperRegistry, type ZookeeperRegistryOptions } from "../src/index";

/** A raw ZooKeeper client with promises. */
export class Admin {
  private constructor(readonly client: zookeeper.Client) {}

  static connect(connectString: string, auth?: string): Promise<Admin> {
    const client = zookeeper.createClient(connectString, { sessionTimeout: 4000, spinDelay: 100 });
    if (auth) client.addAuthInfo("digest", Buffer.from(auth));
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error("no ZooKeeper session within 10 s")), 10_000);
      client.once("connected", () => {
        clearTimeout(timer);
        resolve(new Admin(client));
      });
      client.connect();
    });
  }

  mkdirp(path: string): Promise<void> {
    return new Promise((resolve, reject) =>
      this.client.mkdirp(path, (error) => (error ? reject(error) : resolve())),
    );
  }

  create(path: string, data: string, mode = zookeeper.CreateMode.PERSISTENT): Promise<string> {
    return new Promise((resolve, reject) =>
      this.client.create(path, Buffer.from(data), mode, (error, created) =>
        error ? reject(error) : resolve(created),
      ),
    );
  }

  getData(path: string): Promise<{ data: string; stat: zookeeper.Stat }> {
    return new Promise((resolve, reject) =>
      this.client.getData(path, (error, data, stat) =>
        error ? reject(error) : resolve({ data: String(data ?? ""), stat }),
      ),
    );
  }

  setData(path: string, data: string): Promise<void> {
    return new Promise((resolve, reject) =>
      this.client.setData(path, Buffer.from(data), -1, (error) =>
        error ? reject(error) : resolve(),
      ),
    );
  }

  children(path: string): Promise<string[]> {
    return new Promise((resolve, reject) =>
      this.client.getChildren(path, (error, children) =>
        error ? reject(error) : resolve(children),
      ),
    );
  }

  exists(path: string): Promise<boolean> {
    return new Promise((resolve, reject) =>
      this.client.exists(path, (error, stat) => (error ? reject(error) : resolve(Boolean(stat)))),
    );
  }

  remove(path: string): Promise<void> {
    return new Promise((resolve, reject) =>
      this.client.remove(path, -1, (error) => (error ? reject(error) : resolve())),
    );
  }

  getACL(path: string): Promise<zookeeper.ACL[]> {
    return new Promise((resolve, reject) =>
      this.client.getACL(path, (error, acls) => (error ? reject(error) : resolve(acls))),
    );
  }

  close(): void {
    this.client.close();
  }
}

let counter = 0;

/** A leaf name no other test uses. */
export function uniqueName(prefix: string): string {
  return `${prefix}${Date.now().toString(36)}${(counter++).toString(36)}`;
}

const cacheDirs: string[] = [];
// Registered in the root suite of every test file that imports these helpers.
afterAll(() => {
  for (const dir of cacheDirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

/** A folder for cache files, removed after the test file. */
export function cacheDir(): string {
  const dir = mkdtempSync(join(tmpdir(), "leaf-zk-cache-"));
  cacheDirs.push(dir);
  return dir;
}

/** Registry options for tests: short sessions (the test server's tickTime is short). */
export function testOptions(
  connectString: string,
  extra: Partial<ZookeeperRegistryOptions> = {},
): ZookeeperRegistryOptions {
  const dir = cacheDir();
  return {
    url: connectString,
    sessionTimeoutMs: 3000,
    connectTimeoutMs: 5000,
    cacheFile: (node: NodeIdentity) => join(dir, node.name, `${node.ip}_${node.port}.json`),
    ...extra,
  };
}

/** Node `i` of leaf name `name`. */
export function nodeOf(name: string, i: number, port = 8080): NodeIdentity {
  return { name, ip: `10.1.${Math.floor(i / 250)}.${(i % 250) + 1}`, port };
}

/** Resolves once `check` holds, polling every 20 ms; rejects after `ms`. */
export async function waitUntil(check: () => boolean, ms: number, what: string): Promise<void> {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** The acquirer fixture: a separate process holding leases (see fixtures/acquirer.ts). */
export const ACQUIRER = fileURLToPath(new URL("./fixtures/acquirer.ts", import.meta.url));

/**
 * A private ZooKeeper for one test file, an operator session on it, and registries closed after.
 */
export interface ZkFixture {
  zk: ZookeeperHandle;
  admin: Admin;
  /** A registry on the file's ZooKeeper with test options, the file's defaults and `extra`. */
  registry(extra?: Partial<ZookeeperRegistryOptions>): ZookeeperRegistry;
}

/** Registers beforeAll/afterAll for a {@link ZkFixture}. */
export function zkFixture(defaults: Partial<ZookeeperRegistryOptions> = {}): ZkFixture {
  const registries: ZookeeperRegistry[] = [];
  const fx = {
    registry(extra: Partial<ZookeeperRegistryOptions> = {}) {
      const created = new ZookeeperRegistry(
        testOptions(fx.zk.connectString, { ...defaults, ...extra }),
      );
      registries.push(created);
      return created;
    },
  } as ZkFixture;
  beforeAll(async () => {
    fx.zk = await startZookeeper({ tickTime: 500 });
    fx.admin = await Admin.connect(fx.zk.connectString);
  });
  afterAll(async () => {
    for (const registry of registries) await registry.close();
    fx.admin?.close();
    await fx.zk?.dispose();
  });
  return fx;
}
