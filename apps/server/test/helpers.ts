// Shared by the tests: a server on a free port with its own data folder and no logs, and a way to
// read answers as text or JSON.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type LeafServer, loadConfig, startServer } from "../src/index";

/** A started server and the folder it keeps its data in. */
export interface TestServer {
  server: LeafServer;
  dir: string;
  stop(): Promise<void>;
}

/** Starts a server on 127.0.0.1 on a free port, data in a new temp folder, with `values` on top. */
export async function startTestServer(values: Record<string, unknown> = {}): Promise<TestServer> {
  const dir = mkdtempSync(join(tmpdir(), "leaf-server-test-"));
  const config = loadConfig({
    values: merge({ server: { host: "127.0.0.1", port: 0, drainMs: 0 }, dataDir: dir }, values),
    env: {},
  });
  const server = await startServer(config, { logger: false });
  return {
    server,
    dir,
    async stop() {
      await server.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** A GET through fastify.inject. */
export async function get(server: LeafServer, url: string, headers: Record<string, string> = {}) {
  return server.app.inject({ method: "GET", url, headers });
}

/** Merges nested plain objects, `b` winning. */
export function merge(
  a: Record<string, unknown>,
  b: Record<string, unknown>,
): Record<string, unknown> {
  const out: Record<string, unknown> = { ...a };
  for (const [k, v] of Object.entries(b)) {
    const left = out[k];
    out[k] = isObject(left) && isObject(v) ? merge(left, v) : v;
  }
  return out;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}
