// `import source from "./browser/x.ts?script"`: the browser module bundled into the text of a
// classic script, by the build (tsup.config.ts) and the tests (vitest.config.ts), both with
// build/browser-script.ts.
declare module "*?script" {
  /** The bundled script's source. */
  const source: string;
  export default source;
}
