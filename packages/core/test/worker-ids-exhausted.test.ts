import { describe, expect, it } from "vitest";
import { checkAcquireRequest, workerIdsExhaustedError } from "../src/adapter";
import { ErrorCodes } from "../src/index";

describe("workerIdsExhaustedError", () => {
  const request = (backups: number) =>
    checkAcquireRequest("registry-test", {
      node: { name: "orders", ip: "10.0.0.1", port: 8080 },
      maxWorkerId: 3,
      backups,
    });

  it("names what was asked, the lease that ends soonest and when ids come back", () => {
    const error = workerIdsExhaustedError("registry-test", request(0), 30_000, {
      workerId: 2,
      ip: "10.0.0.9",
      port: 8081,
      ms: 1234,
    });
    expect(error.code).toBe(ErrorCodes.WORKER_IDS_EXHAUSTED);
    expect(error.message).toBe(
      "[leaf] [registry-test] no free worker id in 0..3 for 10.0.0.1:8080 (service orders): all are " +
        "leased; the soonest lease to end is worker id 2 (10.0.0.9:8081) in 1234 ms unless renewed. " +
        "Ids come back 30000 ms after their holder stops renewing; use a layout with more worker " +
        "bits if the fleet is larger than the range",
    );
    expect(error.details).toEqual({ maxWorkerId: 3, node: "10.0.0.1:8080", backups: 0 });
  });

  it("counts the backups in what was asked, and leaves the soonest lease out when unknown", () => {
    const error = workerIdsExhaustedError("registry-test", request(2), 30_000);
    expect(error.message).toContain("no 3 free worker ids in 0..3 for 10.0.0.1:8080");
    expect(error.message).toContain("all are leased. Ids come back");
    expect(error.details.backups).toBe(2);
  });
});
