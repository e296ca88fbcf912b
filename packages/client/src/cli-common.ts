/**
 * What the agl-worker CLI shares with other CLIs built on this package: the version, the logging flags
 * (validated, wired through `installLogging`) and the one-line error exit.
 */
import { createRequire } from "node:module";
import { installLogging, LOG_FORMATS, LOG_LEVELS, type Logger } from "@agl/core";
import { Option } from "commander";
import pino from "pino";
import pretty from "pino-pretty";

export function packageVersion(): string {
  // ../package.json from both src/ (tests, tsx) and dist/ (the published bin).
  return (createRequire(import.meta.url)("../package.json") as { version: string }).version;
}

export function logLevelOption(): Option {
  return new Option("--log-level <level>", "log level (logs go to stderr)")
    .choices(LOG_LEVELS)
    .env("AGL_LOG_LEVEL")
    .default("info");
}

export function logFormatOption(): Option {
  return new Option("--log-format <format>", "json lines, or pretty (readable); auto = pretty on a terminal")
    .choices(LOG_FORMATS)
    .env("AGL_LOG_FORMAT")
    .default("auto");
}

export function setUpLogging(name: string, opts: { logLevel: string; logFormat: string }): Logger {
  return installLogging({
    pino: pino as never,
    pretty: pretty as never,
    level: opts.logLevel,
    format: opts.logFormat,
    name,
  }).logger;
}

/** Print `name: message` (one line, no stack) on stderr and exit non-zero. */
export function exitWithError(name: string, error: unknown, code = 1): never {
  const message = error instanceof Error ? error.message : String(error);
  process.stderr.write(`${name}: ${message.replace(/\s*\n\s*/g, " ")}\n`);
  if (process.env.AGL_DEBUG && error instanceof Error && error.stack)
    process.stderr.write(`${error.stack}\n`);
  process.exit(code);
}
