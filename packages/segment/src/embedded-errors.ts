// The errors of the embedded store's write path: a failed append or reopen, with the file system's
// error code put in words (a full disk, a file size limit, too many open files).
import { ErrorCodes, LeafError } from "@leaf/core";
import { COMPONENT } from "./validation";

/** A file system error in words, naming its code and what it usually means. */
export function describeCause(cause: unknown): string {
  const e = cause as NodeJS.ErrnoException;
  switch (e?.code) {
    case "ENOSPC":
      return `the disk is full (ENOSPC: ${e.message})`;
    case "EDQUOT":
      return `the disk quota is used up (EDQUOT: ${e.message})`;
    case "EFBIG":
      return `the file size limit was reached (EFBIG: ulimit -f, or the file system's largest file: ${e.message})`;
    case "EMFILE":
    case "ENFILE":
      return `too many open files (${e.code}: ${e.message})`;
    default:
      return e?.message ?? String(cause);
  }
}

/** UNAVAILABLE for an append that wrote `written` of `total` bytes, or failed to sync. */
export function writeError(
  path: string,
  cause: unknown,
  written: number,
  total: number,
): LeafError {
  const reason = describeCause(cause);
  return new LeafError({
    component: COMPONENT,
    code: ErrorCodes.UNAVAILABLE,
    message:
      `could not write the journal ${path}: ${reason}, after ${written} of ${total} bytes; nothing ` +
      "of this write was handed out, and the store refuses every call until the journal can be " +
      "written and verified again: free disk space (or raise the file size limit); the next call tries again",
    details: { path, reason, written, total },
    cause,
  });
}

/** UNAVAILABLE for a journal that could not be reopened after a compaction (or a repair). */
export function reopenError(path: string, cause: unknown): LeafError {
  const reason = describeCause(cause);
  return new LeafError({
    component: COMPONENT,
    code: ErrorCodes.UNAVAILABLE,
    message:
      `could not reopen the journal ${path} (replaced by its compacted copy): ${reason}; the store refuses every ` +
      "call until it has reopened and verified the journal (the next call tries again): raise the " +
      "open file limit or free disk space",
    details: { path, reason },
    cause,
  });
}
