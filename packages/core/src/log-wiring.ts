/**
 * The one place the CLIs wire a logging library into agl: `installLogging` builds a pino logger on
 * stderr (JSON lines for machines, pino-pretty's readable lines for people) and installs it as the
 * process-wide logger every component falls back to. Core stays free of the dependency: the CLI passes
 * the pino (and pino-pretty) modules in.
 */
import { InvalidArgumentError } from "./errors.js";
import { envLogLevel, LOG_LEVELS, type Logger, type LogLevel, parseLogLevel, setLogger } from "./logger.js";

/** The part of a pino logger we call. */
export interface PinoLike {
  debug(obj: object, msg?: string): void;
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
  error(obj: object, msg?: string): void;
}

/** A pino logger behind the agl `Logger` contract: `(message, ...details)` becomes `(fields, message)`. */
export function pinoLogger(pino: PinoLike): Logger {
  const at =
    (level: keyof PinoLike) =>
    (message: string, ...details: unknown[]) =>
      pino[level](fieldsOf(details), message);
  return { debug: at("debug"), info: at("info"), warn: at("warn"), error: at("error") };
}

function fieldsOf(details: unknown[]): object {
  if (details.length === 0) return {};
  if (details.length === 1) {
    const [only] = details;
    if (only instanceof Error) return { err: only };
    if (typeof only === "object" && only !== null && !Array.isArray(only)) return only;
    return { detail: only };
  }
  return { details: details.map((d) => (d instanceof Error ? { message: d.message, name: d.name } : d)) };
}

export const LOG_FORMATS = ["json", "pretty", "auto"] as const;
export type LogFormat = (typeof LOG_FORMATS)[number];

export interface InstallLoggingOptions {
  /** The `pino` module's default export (typed loosely: core does not depend on pino). */
  pino: { (options: any, stream?: any): PinoLike; destination(options: any): unknown };
  /** The `pino-pretty` module's default export; without it "pretty" falls back to JSON. */
  pretty?: (options: any) => unknown;
  /** From `--log-level`; default `AGL_LOG_LEVEL`, else "info". Validated (an unknown level throws). */
  level?: string;
  /** "json", "pretty" or "auto" (pretty when stderr is a terminal). Default `AGL_LOG_FORMAT`, else auto. */
  format?: string;
  /** Name put on every line (the CLI's). */
  name?: string;
}

/**
 * Build the CLI logger (always stderr: stdout is for results) and install it process-wide. Returns it
 * with the level it resolved.
 */
export function installLogging(options: InstallLoggingOptions): {
  logger: Logger;
  level: LogLevel;
  /**
   * Write one line on stderr whatever the level (start-up lines scripts read): a JSON line shaped like
   * the logger's own (level 30) under the json format, the plain message otherwise.
   */
  announce: (message: string, fields?: Record<string, unknown>) => void;
} {
  const level =
    options.level === undefined ? envLogLevel("info") : parseLogLevel(options.level, "--log-level");
  const format = parseFormat(options.format ?? process.env.AGL_LOG_FORMAT ?? "auto");
  const pretty = format === "pretty" || (format === "auto" && process.stderr.isTTY === true);
  const base = {
    level,
    ...(options.name ? { name: options.name } : {}),
    base: { pid: process.pid },
    // Belt and braces: a secret passed as a field by mistake never reaches the log.
    redact: { paths: ["api_key", "token", "authorization", "*.api_key", "*.token"], censor: "[redacted]" },
  };
  const stream =
    pretty && options.pretty
      ? options.pretty({ destination: 2, sync: true, colorize: process.stderr.isTTY === true })
      : batchedLines(options.pino.destination({ fd: 2, sync: true }) as LineSink);
  const logger = pinoLogger(options.pino(base, stream));
  setLogger(logger);
  const announce = (message: string, fields: Record<string, unknown> = {}) => {
    const line = pretty
      ? message
      : JSON.stringify({
          level: 30,
          time: Date.now(),
          pid: process.pid,
          ...(options.name ? { name: options.name } : {}),
          ...fields,
          msg: message,
        });
    process.stderr.write(`${line}\n`);
  };
  return { logger, level, announce };
}

/** Where batched log lines go (pino's synchronous stderr destination). */
export interface LineSink {
  write(chunk: string): unknown;
}

/** A pino JSON line at warn (40) or above: written at once, never left in a buffer. */
const URGENT = /^\{"level":(?:[4-9]\d|\d{3})\b/;

/**
 * JSON log lines to `sink`, the lines of one event-loop turn in one write: a server logging one line
 * per request otherwise pays a write(2) per request (6-11% of the store server's CPU per rollout on
 * Agent Lightning's `rollout` benchmark). Warn and error lines flush everything at once, a burst
 * flushes every 64 KiB, and process exit flushes what is left, so no line waits behind a failure.
 */
export function batchedLines(
  sink: LineSink,
  options: { flushOnExit?: boolean } = {},
): LineSink & { flush(): void } {
  let pending = "";
  let scheduled = false;
  const flush = () => {
    scheduled = false;
    if (pending === "") return;
    const chunk = pending;
    pending = "";
    sink.write(chunk);
  };
  if (options.flushOnExit ?? true) process.once("exit", flush);
  return {
    write(line: string) {
      pending += line;
      if (pending.length > 64 * 1024 || URGENT.test(line)) flush();
      else if (!scheduled) {
        scheduled = true;
        setImmediate(flush);
      }
    },
    flush,
  };
}

function parseFormat(value: string): LogFormat {
  const format = value.trim().toLowerCase();
  if ((LOG_FORMATS as readonly string[]).includes(format)) return format as LogFormat;
  throw new InvalidArgumentError(
    "--log-format",
    `unknown log format ${JSON.stringify(value)} (one of ${LOG_FORMATS.join(", ")})`,
  );
}

/** The part of commander's `Option` that {@link logFlagOptions} uses. */
export interface OptionLike<O> {
  choices(values: readonly string[]): O;
  env(name: string): O;
  default(value: unknown, description?: string): O;
}

/**
 * `--log-level` (validated choices, `AGL_LOG_LEVEL`, default info) and `--log-format` (`AGL_LOG_FORMAT`,
 * default auto) for a commander CLI: pass commander's `Option` class, add the results to the program,
 * then hand `opts.logLevel` / `opts.logFormat` to {@link installLogging}.
 */
export function logFlagOptions<O extends OptionLike<O>>(
  OptionClass: new (flags: string, description?: string) => O,
): O[] {
  return [
    new OptionClass("--log-level <level>", "log level (logs go to stderr)")
      .choices(LOG_LEVELS)
      .env("AGL_LOG_LEVEL")
      .default("info"),
    new OptionClass("--log-format <format>", "json lines, or pretty (readable); auto = pretty on a terminal")
      .choices(LOG_FORMATS)
      .env("AGL_LOG_FORMAT")
      .default("auto"),
  ];
}
