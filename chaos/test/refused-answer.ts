// Refused answers in a history, for the checker's tests (no processes).
import { History } from "../src/nemesis/history";

type Mode = "segment" | "snowflake";

/** Records in `history` one request to `server` at `atMs` refused with `code`, in `mode`'s space nem. */
export function recordRefused(
  history: History,
  server: string,
  atMs: number,
  code: string,
  mode: Mode,
): void {
  history.record(
    {
      client: `${server} java ${mode}`,
      server,
      incarnation: 1,
      fromMs: atMs,
      toMs: atMs + 10,
      mode,
      space: `${mode}:nem`,
      ids: 0,
      code,
    },
    [],
    false,
  );
}

/** A history of one request to `server` at `atMs` refused with `code`. */
export function refusedAt(
  server: string,
  atMs: number,
  code = "SEGMENTS_EXHAUSTED",
  mode: Mode = "segment",
): History {
  const history = new History();
  recordRefused(history, server, atMs, code, mode);
  return history;
}
