// server.workers (`--workers N`) in the configuration: what it accepts, and what it refuses before
// anything starts because it cannot be made safe (several worker processes must never share a
// worker id), each refusal naming the key to change.
import { mkdtempSync, rmSync } from "node:fs";
import { availableParallelism, tmpdir } from "node:os";
import { join } from "node:path";
import { isLeafError } from "@leaf/core";
import { runNode } from "@leaf/testkit";
import { afterAll, describe, expect, it } from "vitest";
import { loadConfig } from "../src/index";
import { CLI } from "./cli-process";

const dir = mkdtempSync(join(tmpdir(), "leaf-workers-config-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const load = (values: Record<string, unknown>, env: Record<string, string> = {}) =>
  loadConfig({ values, env, cwd: dir });

/** The INVALID_CONFIG problem loadConfig reports for `values`: its message. */
function refusal(values: Record<string, unknown>, env: Record<string, string> = {}): string {
  try {
    load(values, env);
  } catch (error) {
    if (isLeafError(error, "INVALID_CONFIG")) return error.message;
    throw error;
  }
  throw new Error("expected loadConfig to refuse the configuration");
}

describe("server.workers", () => {
  it("is 1 by default, a number, or auto for the cores this process may use", () => {
    expect(load({}).server.workers).toBe(1);
    expect(load({ server: { workers: 4 } }).server.workers).toBe(4);
    expect(load({}, { LEAF_SERVER_WORKERS: "auto" }).server.workers).toBe(
      Math.min(availableParallelism(), 64),
    );
    for (const bad of [0, 65, "two", "1.5"]) {
      expect(refusal({ server: { workers: bad } })).toContain("server.workers");
    }
  });

  it("gives each worker its own local worker id: 0, 1, ... on loopback, or the ones listed", () => {
    const defaults = load({ server: { workers: 3 } }).snowflake!.registry;
    expect(defaults).toMatchObject({ kind: "local", workerIds: [0, 1, 2] });
    const listed = load({ server: { workers: 2 }, snowflake: { local: { workerIds: "7, 9" } } });
    expect(listed.snowflake!.registry).toMatchObject({ workerIds: [7, 9] });
    // One process: one id, as snowflake.local.workerId.
    expect(load({ snowflake: { local: { workerIds: [5] } } }).snowflake!.registry).toMatchObject({
      workerId: 5,
      workerIds: undefined,
    });
  });

  it("refuses a local worker id the workers would share, naming the key", () => {
    const one = refusal({ server: { workers: 2 }, snowflake: { local: { workerId: 5 } } });
    expect(one).toContain("snowflake.local.workerId (options) gives one worker id");
    expect(one).toContain("snowflake.local.workerIds (e.g. 5,6)");
    const map = refusal({
      server: { workers: 2 },
      snowflake: { local: { workIdMap: { "10.0.0.1:8080": 1 } } },
    });
    expect(map).toContain("snowflake.local.workIdMap (options) gives one worker id per ip:port");
    expect(
      refusal({ server: { workers: 3 }, snowflake: { local: { workerIds: "5,6" } } }),
    ).toContain(
      "snowflake.local.workerIds (options) lists 2 worker id(s) (5, 6) but server.workers (options) runs 3",
    );
    expect(
      refusal({ server: { workers: 2 }, snowflake: { local: { workerIds: "5,5" } } }),
    ).toContain("lists a worker id twice");
    expect(
      refusal({ server: { workers: 2 }, snowflake: { local: { workerIds: "5,6", workerId: 5 } } }),
    ).toContain("are both set; keep one");
    // Beyond loopback a default id is everyone's: the ids must be listed.
    expect(refusal({ server: { workers: 2, host: "0.0.0.0" } })).toContain(
      "default worker ids 0..1 while listening on 0.0.0.0",
    );
  });

  it("gives a StatefulSet pod a block of worker ids, one per worker process, and refuses auto and a block past the layout", () => {
    const pod = (workers: unknown, hostname: string, extra: Record<string, unknown> = {}) => ({
      values: {
        server: { workers },
        segment: { enabled: false },
        snowflake: {
          registry: "redis",
          statefulSet: true,
          redis: { url: "redis://127.0.0.1:6379" },
          ...extra,
        },
      },
      env: { HOSTNAME: hostname },
    });
    const ids = (workers: unknown, hostname: string, extra?: Record<string, unknown>) => {
      const { values, env } = pod(workers, hostname, extra);
      return load(values, env).snowflake?.pod?.workerIds;
    };
    // Pod k holds k x workers .. k x workers + workers - 1: pods of one width never meet.
    expect(ids(2, "leaf-0")).toEqual([0, 1]);
    expect(ids(2, "leaf-1")).toEqual([2, 3]);
    expect(ids(3, "leaf-2", { statefulSetOffset: 100 })).toEqual([106, 107, 108]);
    expect(ids(1, "leaf-5")).toEqual([5]);
    // auto depends on each machine's cores: the block's width must be the same in every pod.
    const auto = pod("auto", "leaf-1");
    expect(refusal(auto.values, auto.env)).toContain("server.workers (options) is auto (");
    expect(refusal(auto.values, auto.env)).toContain("give a number (the same in every pod)");
    const past = pod(2, "leaf-512");
    expect(refusal(past.values, past.env)).toContain(
      `the pod's last worker id 1025 (HOSTNAME "leaf-512", ordinal 512 x 2 worker processes (server.workers (options)) + 1, plus snowflake.statefulSetOffset / LEAF_SNOWFLAKE_STATEFUL_SET_OFFSET 0) is above the layout's largest worker id 1023`,
    );
    expect(refusal(past.values, past.env)).toContain("or each pod fewer worker processes");
    // The local registry's own ids beside the pod's name would be ignored: refused, each named.
    const listed = pod(2, "leaf-1", { registry: "local", local: { workerIds: "5,6" } });
    expect(refusal(listed.values, listed.env)).toContain(
      "snowflake.statefulSet (options) takes the worker ids from the pod's name (a block of 2, one per worker process); remove snowflake.local.workerIds (options), which would be ignored",
    );
    const one = pod(1, "leaf-1", { registry: "local", local: { workerIds: [5], workerId: 5 } });
    expect(refusal(one.values, one.env)).toContain(
      "remove snowflake.local.workerId (options) and snowflake.local.workerIds (options), which would be ignored",
    );
  });

  it("takes --workers on the command line, over the file and the environment", async () => {
    const env = { LEAF_SERVER_WORKERS: "1", LEAF_DATA_DIR: join(dir, "cli") };
    const bad = await runNode(CLI, ["--workers", "0", "--check"], { env, cwd: dir });
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain(
      '--workers must be an integer from 1 to 64, or auto (one per core), got "0"',
    );
    const local = await runNode(CLI, ["--workers=2", "--check"], {
      env: { ...env, LEAF_SERVER_HOST: "0.0.0.0" },
      cwd: dir,
    });
    expect(local.code).toBe(1);
    expect(local.stderr).toContain("snowflake.local.workerIds");
    const ok = await runNode(CLI, ["--workers", "3", "--check"], { env, cwd: dir });
    expect(ok.code, ok.stderr).toBe(0);
  });
});
