/**
 * A minimal logger contract so the runner, tracer and trainer can report without choosing a logging
 * library for the user; pino, winston and `console` all satisfy it.
 */
export interface Logger {
  debug(message: string, ...details: unknown[]): void;
  info(message: string, ...details: unknown[]): void;
  warn(message: string, ...details: unknown[]): void;
  error(message: string, ...details: unknown[]): void;
}

export type LogLevel = "debug" | "info" | "warn" | "error" | "silent";

const ORDER: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40, silent: 100 };

/** A `console` logger that drops messages below `level` (default "info"; `AGL_LOG_LEVEL` overrides). */
export function consoleLogger(level: LogLevel = defaultLevel()): Logger {
  const min = ORDER[level];
  const at = (l: Exclude<LogLevel, "silent">, sink: (...args: unknown[]) => void) =>
    ORDER[l] >= min
      ? (message: string, ...details: unknown[]) => sink(`[agl] ${message}`, ...details)
      : () => {};
  return {
    debug: at("debug", console.debug),
    info: at("info", console.info),
    warn: at("warn", console.warn),
    error: at("error", console.error),
  };
}

export const silentLogger: Logger = consoleLogger("silent");

function defaultLevel(): LogLevel {
  const env = process.env.AGL_LOG_LEVEL?.toLowerCase();
  return env && env in ORDER ? (env as LogLevel) : "warn";
}

/** Accepts any object with the four methods (zod `custom` check used by option schemas). */
export function isLogger(value: unknown): value is Logger {
  if (typeof value !== "object" || value === null) return false;
  const v = value as Record<string, unknown>;
  return ["debug", "info", "warn", "error"].every((k) => typeof v[k] === "function");
}
