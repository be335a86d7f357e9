// The one error type the test kit throws, so a failing test names the kit, the service and the fix.

/** Stable codes of {@link TestkitError}, for tests that tell the failures apart. */
export type TestkitErrorCode =
  | "TESTKIT_BINARY_MISSING"
  | "TESTKIT_START_FAILED"
  | "TESTKIT_EXTERNAL_SERVER"
  | "TESTKIT_NOT_RUNNING"
  | "TESTKIT_BAD_ENV"
  | "TESTKIT_DISPOSED"
  | "TESTKIT_BAD_OPTION"
  | "TESTKIT_PAUSE_FAILED";

/**
 * Raised by the test kit. The message starts with `[leaf] [testkit]`, says what happened and what
 * to do; `code` is stable.
 */
export class TestkitError extends Error {
  /** Stable machine-readable reason. */
  readonly code: TestkitErrorCode;

  /** @param message the text after the `[leaf] [testkit]` prefix */
  constructor(code: TestkitErrorCode, message: string, options?: { cause?: unknown }) {
    super(`[leaf] [testkit] ${message}`, options);
    this.name = "TestkitError";
    this.code = code;
  }
}
