import { describe, expect, it } from "vitest";
import { DEFAULT_SCHEMA, qualifyPostgresTable } from "../src/index";

describe("qualifyPostgresTable", () => {
  it("puts a table named without a schema in public, whoever logs in", () => {
    expect(DEFAULT_SCHEMA).toBe("public");
    expect(qualifyPostgresTable("leaf_alloc")).toBe("public.leaf_alloc");
  });

  it("uses a schema-qualified name as written", () => {
    expect(qualifyPostgresTable("tenant_a.leaf_alloc")).toBe("tenant_a.leaf_alloc");
    expect(qualifyPostgresTable("public.Leaf_Alloc")).toBe("public.Leaf_Alloc");
  });
});
