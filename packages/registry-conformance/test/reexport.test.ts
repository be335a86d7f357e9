// The deprecated package hands out the very suite of @leaf/conformance, not a copy.
import * as moved from "@leaf/conformance/registry";
import { expect, test } from "vitest";
import * as deprecated from "../src/index";

test("re-exports registryConformance of @leaf/conformance/registry", () => {
  expect(deprecated.registryConformance).toBe(moved.registryConformance);
  expect(Object.keys(deprecated)).toEqual(["registryConformance"]);
});
