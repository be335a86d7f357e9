// The view of a real load balancer: HAProxy in front of two nodes, checking /health/ready every
// 100 ms, wrk behind it (8 keep-alive connections). New nodes with the default lazy loading are
// taken in at once; a SIGTERM on one node under load takes it out while it still answers, and no
// request fails: no error of wrk's (connect, read, write, timeout) and no answer but an id, even
// with the other node held up for 300 ms meanwhile.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { layouts } from "@leaf/core";
import { freePort, stopAll, waitUntil } from "@leaf/testkit";
import { afterAll, describe, expect, it } from "vitest";
import { startCli } from "./cli-process";
import { startProxy } from "./proxy-process";
import { otherAnswers, wrk } from "./wrk";

const dirs: string[] = [];
const stops: Array<() => void> = [];
afterAll(async () => {
  for (const stop of stops) stop();
  await stopAll();
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

/** HAProxy (installed by scripts/install-services.sh) on `port`, balancing over `backends`. */
async function haproxy(dir: string, port: number, backends: number[]) {
  const file = join(dir, "haproxy.cfg");
  writeFileSync(
    file,
    [
      "global",
      "  maxconn 2000",
      "defaults",
      "  mode http",
      "  timeout connect 2s",
      "  timeout client 30s",
      "  timeout server 30s",
      // Without it a check gets `inter` (100 ms) for connect and answer: a node's event loop held
      // up that long (a GC, a busy CI machine) fails one check and, with fall 1, takes the node
      // out; with the other one draining, HAProxy answers 503 itself. A 503 from /health/ready
      // still takes a node out at the next check.
      "  timeout check 5s",
      // A failed request is shown to the client, never retried on the other node.
      "  retries 0",
      "frontend leaf",
      `  bind 127.0.0.1:${port}`,
      "  default_backend nodes",
      "backend nodes",
      "  balance roundrobin",
      "  option httpchk",
      "  http-check send meth GET uri /health/ready",
      "  http-check expect status 200",
      "  default-server inter 100ms fall 1 rise 1",
      ...backends.map((p, i) => `  server node${i} 127.0.0.1:${p} check`),
      "",
    ].join("\n"),
  );
  const proxy = startProxy("haproxy", ["-f", file, "-db"]);
  stops.push(proxy.stop);
  return proxy;
}

describe("behind HAProxy checking /health/ready", () => {
  it("takes new lazy nodes in at once and a SIGTERMed node out under load, with no failed request", async () => {
    const dir = mkdtempSync(join(tmpdir(), "leaf-server-balancer-"));
    dirs.push(dir);
    const ports = [await freePort(), await freePort()];
    const nodes = await Promise.all(
      ports.map((port, i) => {
        const cwd = join(dir, `node${i}`);
        return startCli(mkdtempSync(`${cwd}-`), {
          LEAF_SERVER_PORT: String(port),
          LEAF_SERVER_DRAIN_MS: "2500",
          LEAF_SNOWFLAKE_LOCAL_WORKER_ID: String(i + 1),
        });
      }),
    );
    const front = await freePort();
    const proxy = await haproxy(dir, front, ports);
    // Both nodes are taken in (each answers through the balancer) although no tag has a range.
    const seen = new Set<number>();
    await waitUntil("both nodes up behind HAProxy", async () => {
      const res = await fetch(`http://127.0.0.1:${front}/api/snowflake/get/x`).catch(() => null);
      if (res?.status === 200) seen.add(layouts.leaf.decompose(await res.text()).workerId);
      return seen.size === 2;
    });
    // Under load, node 0 gets SIGTERM 2.5 s in; wrk runs on through its drain and stop. While node
    // 0 drains, node 1 is held up for 300 ms (as a long GC or a busy machine would): a check that
    // slow must not take the last node out.
    const run = wrk(`http://127.0.0.1:${front}/api/snowflake/get/x`, 8);
    setTimeout(() => nodes[0]!.child.kill("SIGTERM"), 2500);
    setTimeout(() => {
      nodes[1]!.child.kill("SIGSTOP");
      setTimeout(() => nodes[1]!.child.kill("SIGCONT"), 300);
    }, 3500);
    const { result, output } = await run;
    const context = `${output}\n${proxy.output()}\n${nodes[0]!.output()}`;
    expect(await nodes[0]!.exited, context).toBe(0);
    expect(
      {
        connect: result.connect,
        read: result.read,
        write: result.write,
        timeout: result.timeout,
      },
      context,
    ).toEqual({ connect: 0, read: 0, write: 0, timeout: 0 });
    expect(otherAnswers(result), context).toEqual([]);
    expect(result.answers.id ?? 0, context).toBeGreaterThan(1000);
    // The other node answered after node 0 had stopped.
    const after = await fetch(`http://127.0.0.1:${front}/api/snowflake/get/x`);
    expect(layouts.leaf.decompose(await after.text()).workerId).toBe(2);
    nodes[1]!.child.kill("SIGTERM");
    expect(await nodes[1]!.exited).toBe(0);
  });
});
