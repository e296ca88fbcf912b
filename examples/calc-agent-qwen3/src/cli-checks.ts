import { type ParseArgsConfig, parseArgs } from "node:util";

/** Command-line parsing and checks shared by the job's and pretrain-base's parsers. */

const USAGE = Symbol.for("agl.calc-agent-qwen3.usage");

/** A bad command line: the script prints it and exits with status 2. */
export class UsageError extends Error {
  readonly [USAGE] = true;
  override name = "UsageError";
  static isInstance(error: unknown): error is UsageError {
    return typeof error === "object" && error !== null && USAGE in error;
  }
}

/** `parseArgs` over argv (after `--`, if pnpm passed one); its errors become `makeError(message)`. */
export function parseCliArgs(
  argv: readonly string[],
  options: NonNullable<ParseArgsConfig["options"]>,
  makeError: (message: string) => UsageError,
): Record<string, string | undefined> {
  const args = argv[0] === "--" ? argv.slice(1) : [...argv];
  try {
    return parseArgs({ args, options }).values as Record<string, string | undefined>;
  } catch (e) {
    throw makeError((e as Error).message);
  }
}

/** Runs `parse`; a `UsageError` is printed after `prefix` and the process exits with status 2. */
export async function orExitOnUsage<T>(prefix: string, parse: () => T | Promise<T>): Promise<T> {
  try {
    return await parse();
  } catch (e) {
    if (!UsageError.isInstance(e)) throw e;
    console.error(`${prefix} ${e.message}`);
    process.exit(2);
  }
}

/** Checks of numeric command-line options. */
export type Check = [(n: number) => boolean, string];
export const INT1: Check = [(n) => Number.isInteger(n) && n >= 1, "an integer >= 1"];
export const INT0: Check = [(n) => Number.isInteger(n) && n >= 0, "an integer >= 0"];
export const POSITIVE: Check = [(n) => n > 0, "a positive number"];
export const SHARE: Check = [(n) => n >= 0 && n <= 1, "a number from 0 to 1"];

/** Each named option as a number, and one message per option that is not a number passing its check. */
export function checkNumbers(
  values: Record<string, string | undefined>,
  checks: Record<string, Check>,
): { numbers: Record<string, number>; problems: string[] } {
  const problems: string[] = [];
  const numbers: Record<string, number> = {};
  for (const [name, [ok, what]] of Object.entries(checks)) {
    const raw = values[name] ?? "";
    const n = Number(raw);
    if (raw.trim() === "" || !Number.isFinite(n) || !ok(n))
      problems.push(`--${name} must be ${what}, got "${raw}"`);
    numbers[name] = n;
  }
  return { numbers, problems };
}
