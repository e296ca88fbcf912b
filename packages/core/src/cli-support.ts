/** Small pieces every agl CLI shares (no dependency beyond node): its version and its error exit. */
import { randomBytes } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { InvalidArgumentError } from "./errors.js";
import { redactSecrets } from "./redact.js";

/**
 * The `version` of the nearest package.json above the calling module (pass its `import.meta.url`):
 * the same answer from src/ (tests, tsx) and from the bundled dist/.
 */
export function packageVersion(moduleUrl: string): string {
  let dir = dirname(fileURLToPath(moduleUrl));
  for (;;) {
    const file = join(dir, "package.json");
    if (existsSync(file))
      return (JSON.parse(readFileSync(file, "utf8")) as { version?: string }).version ?? "0.0.0";
    const parent = dirname(dir);
    if (parent === dir) return "0.0.0";
    dir = parent;
  }
}

/**
 * Print `name: message` on stderr as one line (the stack only with AGL_DEBUG=1) and exit with `code`:
 * a CLI user needs the fix, not 27 lines of frames.
 */
export function exitWithError(name: string, error: unknown, code = 1): never {
  const message = redactSecrets(error instanceof Error ? error.message : String(error));
  process.stderr.write(`${name}: ${message.replace(/\s*\n\s*/g, " ")}\n`);
  if (process.env.AGL_DEBUG && error instanceof Error && error.stack)
    process.stderr.write(`${error.stack}\n`);
  process.exit(code);
}

/**
 * A secret given on a command line, turned into a reference: it is put in this process's environment
 * under a fresh variable name, which is returned for `api_key_env`. Resources carry only the name, so the
 * value never reaches a store (in-process runners and child processes started afterwards read it from
 * the environment; a worker on another machine needs the variable set there, under a name you choose).
 */
export function secretToEnv(secret: string, prefix = "AGL_CLI_SECRET"): string {
  if (!/^[A-Z_][A-Z0-9_]*$/.test(prefix)) {
    throw new InvalidArgumentError(
      "prefix",
      `must be an environment variable name, got ${JSON.stringify(prefix)}`,
    );
  }
  const name = `${prefix}_${randomBytes(6).toString("hex").toUpperCase()}`;
  process.env[name] = secret;
  return name;
}
