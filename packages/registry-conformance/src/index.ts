// Deprecated: the registry suite moved to @leaf/conformance (subpath `@leaf/conformance/registry`),
// next to the segment store suite. This package re-exports it, unchanged, for one release.
export {
  /** @deprecated Import from `@leaf/conformance/registry`. */
  type ConformanceContext,
  /** @deprecated Import `RegistryConformanceOptions` from `@leaf/conformance/registry`. */
  type ConformanceOptions,
  /** @deprecated Import from `@leaf/conformance/registry`. */
  registryConformance,
  /** @deprecated Import from `@leaf/conformance/registry`. */
  type TestFunction,
  /** @deprecated Import from `@leaf/conformance/registry`. */
  type Unsupported,
} from "@leaf/conformance/registry";
