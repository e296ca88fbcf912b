/** Structured logging for the store server: one JSON object per line, or any sink the caller injects. */
export interface StoreServerLogger {
  /** Per-request lines (see request-log.ts); a logger without it drops them. */
  debug?(message: string, fields?: Record<string, unknown>): void;
  info(message: string, fields?: Record<string, unknown>): void;
  warn(message: string, fields?: Record<string, unknown>): void;
  error(message: string, fields?: Record<string, unknown>): void;
}

/**
 * JSON lines at info and above (`level: "debug"` adds debug), e.g. `{"ts":"...","level":"info","msg":"request",...}`, to `write` one line per call,
 * or by default to stderr batched: the lines of one event-loop turn go out in one write (a write per
 * request log line was a syscall per request). Errors flush at once; so does process exit.
 */
export function jsonLinesLogger(
  write?: (line: string) => void,
  options: { level?: "debug" | "info" } = {},
): StoreServerLogger {
  const out = write ?? batchedStderr();
  const emit = (level: string) => (message: string, fields?: Record<string, unknown>) => {
    out(`${JSON.stringify({ ts: new Date().toISOString(), level, msg: message, ...fields })}\n`);
    if (level === "error") (out as Partial<Batched>).flush?.();
  };
  return {
    ...(options.level === "debug" ? { debug: emit("debug") } : {}),
    info: emit("info"),
    warn: emit("warn"),
    error: emit("error"),
  };
}

type Batched = ((line: string) => void) & { flush: () => void };

/** One per process: every default logger shares it (and its single exit hook). */
let sharedStderr: Batched | undefined;

function batchedStderr(): Batched {
  sharedStderr ??= makeBatchedStderr();
  return sharedStderr;
}

function makeBatchedStderr(): Batched {
  let pending = "";
  let scheduled = false;
  const flush = () => {
    scheduled = false;
    if (pending === "") return;
    const chunk = pending;
    pending = "";
    process.stderr.write(chunk);
  };
  process.once("exit", flush);
  const out = (line: string) => {
    pending += line;
    // Bound the buffer under a burst; otherwise the next turn of the loop writes it.
    if (pending.length > 64 * 1024) flush();
    else if (!scheduled) {
      scheduled = true;
      setImmediate(flush);
    }
  };
  return Object.assign(out, { flush });
}

export const silentServerLogger: StoreServerLogger = { info() {}, warn() {}, error() {} };
