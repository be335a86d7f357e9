// Issue 11 item 4: two faults at once. A real server under load is SIGKILLed about 2.5 s after a
// timestamp report, its clock (libfaketime) is stepped back 2 s, and it is restarted at once. The
// stored timestamp is that report, so the clock now reads later than it; ids issued in the 2.5 s
// after the report must not be issued again. Every id of both runs is counted.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  countDuplicates,
  FakeClock,
  freePort,
  type MysqlHandle,
  startMysql,
  stopAll,
} from "@leaf/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Load, reportsOf, serverProcess, sleep, until } from "./fault-servers";

const dirs: string[] = [];
let mysql: MysqlHandle;

beforeAll(async () => {
  mysql = await startMysql();
}, 180_000);

afterAll(async () => {
  await stopAll();
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

const BATCH = "/api/snowflake/get/restart?count=2000";
const SINGLE = "/api/snowflake/get/restart";

async function restartBehind(registry: Record<string, unknown>) {
  const dir = mkdtempSync(join(tmpdir(), "leaf-restart-"));
  dirs.push(dir);
  const clock = new FakeClock({ file: join(dir, "faketime.offset") });
  const config = {
    name: `restart-${Math.random().toString(36).slice(2, 8)}`,
    segment: { enabled: false },
    snowflake: { enabled: true, ip: "127.0.0.1", ...registry },
  };
  const server = serverProcess("S", dir, await freePort(), config, clock);
  const batches = new Load(server.port, BATCH, 3, 4);
  const singles = new Load(server.port, SINGLE, 1, 32);
  try {
    await server.start();
    // Wait for a report, then 2.5 s of ids after it.
    const first = (await reportsOf(server)) ?? 0;
    let reportSeenAt = 0;
    await until(
      "a timestamp report",
      async () => {
        const n = await reportsOf(server);
        if (n !== undefined && n > first) reportSeenAt = performance.now();
        return reportSeenAt > 0;
      },
      30_000,
    );
    await sleep(2500 - (performance.now() - reportSeenAt));
    const beforeKill = batches.ids + singles.ids;
    await server.kill();
    clock.set(-2000);
    const restartedAt = performance.now();
    const { started } = await server.tryStart();
    const restartMs = performance.now() - restartedAt;
    if (started) {
      const after = batches.ids + singles.ids;
      await until(
        "ids from the restarted server",
        () => batches.ids + singles.ids > after + 200_000,
      );
    }
    await Promise.all([batches.stop(), singles.stop()]);
    const counted = countDuplicates([...batches.batches, ...singles.batches]);
    return {
      ...counted,
      beforeKill,
      started,
      restartMs: Math.round(restartMs),
      output: server.output,
    };
  } finally {
    await server.kill();
    await Promise.all([batches.stop(), singles.stop()]);
  }
}

describe("a restart with the clock stepped back less than the report interval", () => {
  it("local registry: SIGKILL 2.5 s after a report, clock back 2 s, immediate restart: 0 duplicate ids", async () => {
    const result = await restartBehind({ registry: "local", local: { workerId: 5 } });
    console.log("local:", { ...result, output: undefined });
    expect(result.started, result.output).toBe(true);
    expect(result.beforeKill).toBeGreaterThan(100_000);
    expect(result.duplicates).toBe(0);
  }, 180_000);

  it("MySQL fixed registry: SIGKILL 2.5 s after a report, clock back 2 s, immediate restart: 0 duplicate ids", async () => {
    const database = await mysql.createDatabase("leaf_restart");
    const result = await restartBehind({
      registry: "mysql",
      mysql: { url: mysql.urlFor(database), password: "", mode: "fixed", createTable: true },
    });
    console.log("mysql fixed:", { ...result, output: undefined });
    expect(result.started, result.output).toBe(true);
    expect(result.beforeKill).toBeGreaterThan(100_000);
    expect(result.duplicates).toBe(0);
  }, 180_000);
});
