/** Structured logging for the store server: one JSON object per line, or any sink the caller injects. */
export interface StoreServerLogger {
  info(message: string, fields?: Record<string, unknown>): void;
  warn(message: string, fields?: Record<string, unknown>): void;
  error(message: string, fields?: Record<string, unknown>): void;
}

/** JSON lines on a stream (stderr by default), e.g. `{"ts":"...","level":"info","msg":"request",...}`. */
export function jsonLinesLogger(
  write: (line: string) => void = (line) => process.stderr.write(line),
): StoreServerLogger {
  const emit = (level: string) => (message: string, fields?: Record<string, unknown>) => {
    write(`${JSON.stringify({ ts: new Date().toISOString(), level, msg: message, ...fields })}\n`);
  };
  return { info: emit("info"), warn: emit("warn"), error: emit("error") };
}

export const silentServerLogger: StoreServerLogger = { info() {}, warn() {}, error() {} };
