// The dual-package hazard: an application that loads @leaf/core's ESM build and (through a CommonJS
// dependency) its CommonJS build must still recognise a LeafError made by either copy.
import { createRequire } from "node:module";
import * as esm from "@leaf/core";
import { describe, expect, it } from "vitest";

const cjs = createRequire(import.meta.url)("@leaf/core") as typeof esm;

describe("@leaf/core loaded twice (ESM and CommonJS)", () => {
  it("are two copies with two LeafError classes", () => {
    expect(cjs.LeafError).not.toBe(esm.LeafError);
  });

  it("recognises an error of either copy with isLeafError and instanceof", () => {
    const fromCjs = new cjs.LeafError({ component: "t", code: "UNAVAILABLE", message: "down" });
    const fromEsm = new esm.LeafError({ component: "t", code: "UNAVAILABLE", message: "down" });
    expect(esm.isLeafError(fromCjs)).toBe(true);
    expect(esm.isLeafError(fromCjs, "UNAVAILABLE")).toBe(true);
    expect(esm.isLeafError(fromCjs, "LEASE_LOST")).toBe(false);
    expect(cjs.isLeafError(fromEsm)).toBe(true);
    expect(fromCjs instanceof esm.LeafError).toBe(true);
    expect(fromEsm instanceof cjs.LeafError).toBe(true);
  });

  it("does not take other errors for LeafErrors", () => {
    const plain = Object.assign(new Error("x"), { code: "UNAVAILABLE" });
    expect(esm.isLeafError(plain)).toBe(false);
    expect(cjs.isLeafError(plain)).toBe(false);
    expect(esm.isLeafError(undefined)).toBe(false);
    expect(esm.isLeafError("UNAVAILABLE")).toBe(false);
  });
});
