import { describe, expect, it } from "vitest";
import { checkAcquireRequest, checkReport, checkReportedTimestamp } from "../src/adapter";
import { type AcquireRequest, ErrorCodes, isLeafError, type LeafError } from "../src/index";

const node = { name: "orders", ip: "10.0.0.1", port: 8080 };

function thrown(run: () => unknown): LeafError {
  try {
    run();
  } catch (error) {
    if (isLeafError(error)) return error;
    throw error;
  }
  throw new Error("expected a LeafError, but nothing was thrown");
}

describe("checkAcquireRequest", () => {
  it("returns the request with backups defaulted to 0 and the node's ip:port key", () => {
    expect(checkAcquireRequest("registry-x", { node, maxWorkerId: 1023 })).toEqual({
      node,
      key: "10.0.0.1:8080",
      maxWorkerId: 1023,
      backups: 0,
      signal: undefined,
    });
  });

  it.each([
    ["request", null],
    ["node", { maxWorkerId: 3 }],
    ["node.name", { node: { ...node, name: "" }, maxWorkerId: 3 }],
    ["node.ip", { node: { ...node, ip: 7 }, maxWorkerId: 3 }],
    ["node.port", { node: { ...node, port: 65_536 }, maxWorkerId: 3 }],
    ["node.port", { node: { ...node, port: 80.5 }, maxWorkerId: 3 }],
    ["maxWorkerId", { node, maxWorkerId: -1 }],
    ["maxWorkerId", { node, maxWorkerId: "1023" }],
    ["backups", { node, maxWorkerId: 3, backups: 1.5 }],
    ["backups", { node, maxWorkerId: 3, backups: -1 }],
  ])("rejects a bad %s with INVALID_ARGUMENT from the calling component", (name, request) => {
    const error = thrown(() => checkAcquireRequest("registry-x", request as AcquireRequest));
    expect(error.code).toBe(ErrorCodes.INVALID_ARGUMENT);
    expect(error.details.name).toBe(name);
    expect(error.message).toMatch(/^\[leaf\] \[registry-x\] invalid /);
  });

  it("refuses a requested worker id unless the registry grants one, and checks it against the layout", () => {
    const refused = thrown(() =>
      checkAcquireRequest("registry-x", { node, maxWorkerId: 1023, workerId: 3 }),
    );
    expect(refused.code).toBe(ErrorCodes.INVALID_ARGUMENT);
    expect(refused.details.name).toBe("workerId");
    expect(refused.message).toContain("this registry chooses the id itself");
    const supported = { requestedWorkerId: true };
    expect(
      checkAcquireRequest("registry-x", { node, maxWorkerId: 1023, workerId: 3 }, supported)
        .workerId,
    ).toBe(3);
    for (const [workerId, name] of [
      [1024, "workerId"],
      [-1, "workerId"],
      [2.5, "workerId"],
    ] as const) {
      const error = thrown(() =>
        checkAcquireRequest("registry-x", { node, maxWorkerId: 1023, workerId }, supported),
      );
      expect(error.details.name).toBe(name);
      expect(error.message).toContain("from 0 to 1023");
    }
    const withBackups = thrown(() =>
      checkAcquireRequest(
        "registry-x",
        { node, maxWorkerId: 1023, workerId: 3, backups: 1 },
        supported,
      ),
    );
    expect(withBackups.details.name).toBe("backups");
    expect(withBackups.message).toContain("a requested id is leased alone");
  });

  it("applies a registry's narrower limits, saying them in the message", () => {
    const limits = { maxNameLength: 4, maxIpLength: 7, minPort: 1, maxWorkerIdLimit: 255 };
    const cases = [
      ["node.name", { node, maxWorkerId: 3 }, "at most 4 characters"],
      ["node.ip", { node: { ...node, name: "a" }, maxWorkerId: 3 }, "at most 7 characters"],
      ["node.port", { node: { name: "a", ip: "10.0.1", port: 0 }, maxWorkerId: 3 }, "from 1"],
      ["maxWorkerId", { node: { name: "a", ip: "10.0.1", port: 1 }, maxWorkerId: 256 }, "0 to 255"],
    ] as const;
    for (const [name, request, expected] of cases) {
      const error = thrown(() => checkAcquireRequest("registry-x", request, limits));
      expect(error.details.name).toBe(name);
      expect(error.message).toContain(expected);
    }
    expect(
      checkAcquireRequest(
        "registry-x",
        { node: { name: "a", ip: "10.0.1", port: 1 }, maxWorkerId: 255 },
        limits,
      ).key,
    ).toBe("10.0.1:1");
  });

  it("throws the abort reason of an aborted signal, after the fields are checked", () => {
    const controller = new AbortController();
    controller.abort(new Error("stopping"));
    expect(() =>
      checkAcquireRequest("registry-x", { node, maxWorkerId: 3, signal: controller.signal }),
    ).toThrow("stopping");
    expect(
      thrown(() =>
        checkAcquireRequest("registry-x", { node, maxWorkerId: -3, signal: controller.signal }),
      ).code,
    ).toBe(ErrorCodes.INVALID_ARGUMENT);
  });
});

describe("checkReport", () => {
  const lease = { workerId: 4, backups: [{ workerId: 9, lastTimestamp: 0 }] };

  it("returns the timestamp per worker id, the primary's first, a repeated backup at its highest", () => {
    const reported = checkReport("registry-x", lease, 2_000, [
      { workerId: 9, lastTimestamp: 1_500 },
      { workerId: 9, lastTimestamp: 1_200 },
    ]);
    expect([...reported]).toEqual([
      [4, 2_000],
      [9, 1_500],
    ]);
    expect([...checkReport("registry-x", lease, 7)]).toEqual([[4, 7]]);
  });

  it("rejects a backup the lease does not hold, naming the ones it does", () => {
    for (const workerId of [4, 10]) {
      const error = thrown(() =>
        checkReport("registry-x", lease, 2_000, [{ workerId, lastTimestamp: 1 }]),
      );
      expect(error.details.name).toBe("backups");
      expect(error.message).toContain("backup worker ids (9)");
    }
  });

  it("rejects a timestamp that is not whole ms since the epoch, naming it", () => {
    expect(thrown(() => checkReport("registry-x", lease, -1)).details.name).toBe("timestampMs");
    expect(
      thrown(() => checkReport("registry-x", lease, 5, [{ workerId: 9, lastTimestamp: 1.5 }]))
        .details.name,
    ).toBe("backups[].lastTimestamp");
    expect(
      thrown(() => checkReportedTimestamp("registry-x", "finalTimestampMs", "5")).message,
    ).toContain("invalid finalTimestampMs");
    expect(checkReportedTimestamp("registry-x", "finalTimestampMs", 0)).toBe(0);
  });
});
