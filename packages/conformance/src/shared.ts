// What every suite of this package shares: the part of vitest's `test` a suite takes, the context
// passed to an adapter's factory, and the capability switch (`T | { unsupported: "why" }`) that
// turns a test into a skipped one whose name says why.

/** The part of vitest's `test` a suite uses: pass vitest's `test` itself. */
export interface TestFunction {
  (name: string, fn: () => Promise<void>, timeout?: number): void;
  skip: (name: string, fn: () => Promise<void>) => void;
}

/** What a suite passes to the adapter's factory. */
export interface ConformanceContext {
  /**
   * A name unique to the running test (letters and digits). Every instance created for it shares
   * one storage, empty when first created: use it as the service name, a table, a folder.
   */
  namespace: string;
}

/** A switched-off capability: the reason is shown in the skipped test's name. */
export interface Unsupported {
  unsupported: string;
}

/** A capability an adapter offers (`T`, often `true` or a hook) or switches off with the reason. */
export type Capability<T> = T | Unsupported;

/** Whether a capability switch is off. */
export function isUnsupported(capability: unknown): capability is Unsupported {
  return (
    typeof capability === "object" &&
    capability !== null &&
    typeof (capability as Partial<Unsupported>).unsupported === "string"
  );
}

/** The reason of a capability left out by the adapter. */
export const NOT_DECLARED: Unsupported = { unsupported: "not declared by the adapter" };

/** Registers the skipped test that stands for a capability the adapter does not offer. */
export function skipUnsupported(
  test: TestFunction,
  name: string,
  title: string,
  reason: Unsupported,
): void {
  test.skip(`${name}: ${title} (not offered: ${reason.unsupported})`, async () => {});
}

let namespaces = 0;

/** A namespace no other test of this process uses: `prefix` then letters and digits. */
export function uniqueNamespace(prefix: string): string {
  return `${prefix}${Date.now().toString(36)}${(namespaces++).toString(36)}`;
}

/** Throws "conformance: `message`" unless `condition` holds. */
export function expectTrue(condition: boolean, message: string): asserts condition {
  if (!condition) throw new Error(`conformance: ${message}`);
}
