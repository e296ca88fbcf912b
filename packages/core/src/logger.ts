import { InvalidArgumentError } from "./errors.js";

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

export const LOG_LEVELS = ["debug", "info", "warn", "error", "silent"] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

const ORDER: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40, silent: 100 };

/**
 * Validate a log level from a flag or the environment (case-insensitive). An unknown level is an error
 * naming `source` and the valid levels: silently dropping every log, errors included, is worse.
 */
export function parseLogLevel(value: string, source = "log level"): LogLevel {
  const level = value.trim().toLowerCase();
  if ((LOG_LEVELS as readonly string[]).includes(level)) return level as LogLevel;
  throw new InvalidArgumentError(
    source,
    `unknown log level ${JSON.stringify(value)} (one of ${LOG_LEVELS.join(", ")})`,
  );
}

/** The level `AGL_LOG_LEVEL` names, `fallback` when unset; an invalid value throws naming the variable. */
export function envLogLevel(fallback: LogLevel): LogLevel {
  const env = process.env.AGL_LOG_LEVEL;
  return env === undefined || env === "" ? fallback : parseLogLevel(env, "AGL_LOG_LEVEL");
}

/**
 * A `console` logger that drops messages below `level`. Called without a level it is the process-wide
 * logger (see {@link setLogger}): whatever a CLI installed, else console at `AGL_LOG_LEVEL` (default warn).
 */
export function consoleLogger(level?: LogLevel): Logger {
  if (level === undefined) return processLogger;
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

let installed: Logger | undefined;
let fallback: Logger | undefined;

/**
 * Install the process-wide logger every agl component uses when it is given none (the CLIs install
 * pino here, see `installLogging`); `undefined` restores the console default.
 */
export function setLogger(logger: Logger | undefined): void {
  installed = logger;
}

/** The process-wide logger: the installed one, else console at `AGL_LOG_LEVEL` (default warn). */
export function getLogger(): Logger {
  if (installed) return installed;
  fallback ??= consoleLogger(defaultLevel());
  return fallback;
}

/** Forwards each call to whatever `getLogger()` is at that moment, so late installs reach every component. */
const processLogger: Logger = {
  debug: (m, ...d) => getLogger().debug(m, ...d),
  info: (m, ...d) => getLogger().info(m, ...d),
  warn: (m, ...d) => getLogger().warn(m, ...d),
  error: (m, ...d) => getLogger().error(m, ...d),
};

function defaultLevel(): LogLevel {
  try {
    return envLogLevel("warn");
  } catch (error) {
    // A library cannot exit the process; say so loudly once instead of silencing everything.
    console.warn(`[agl] ${(error as Error).message}; using "warn"`);
    return "warn";
  }
}

/** Accepts any object with the four methods (zod `custom` check used by option schemas). */
export function isLogger(value: unknown): value is Logger {
  if (typeof value !== "object" || value === null) return false;
  const v = value as Record<string, unknown>;
  return ["debug", "info", "warn", "error"].every((k) => typeof v[k] === "function");
}
