/** Small pieces every agl CLI shares (no dependency beyond node): its version and its error exit. */
import { createRequire } from "node:module";

/**
 * The `version` of the package.json one directory above the calling module (`import.meta.url` of a
 * file in src/ or dist/), for `--version`.
 */
export function packageVersion(moduleUrl: string): string {
  return (createRequire(moduleUrl)("../package.json") as { version: string }).version;
}

/**
 * Print `name: message` on stderr as one line (the stack only with AGL_DEBUG=1) and exit with `code`:
 * a CLI user needs the fix, not 27 lines of frames.
 */
export function exitWithError(name: string, error: unknown, code = 1): never {
  const message = error instanceof Error ? error.message : String(error);
  process.stderr.write(`${name}: ${message.replace(/\s*\n\s*/g, " ")}\n`);
  if (process.env.AGL_DEBUG && error instanceof Error && error.stack)
    process.stderr.write(`${error.stack}\n`);
  process.exit(code);
}
