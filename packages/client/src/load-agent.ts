import { existsSync, readFileSync, statSync } from "node:fs";
import { extname, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { type AgentLike, AglError, InvalidArgumentError } from "@agl/core";

const TYPESCRIPT = new Set([".ts", ".mts", ".cts", ".tsx"]);

/** An agent module that could not be loaded: the message names the file (and the line when known). */
export class AgentModuleError extends AglError {
  readonly file: string;
  constructor(file: string, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "AgentModuleError";
    this.file = file;
  }
}

/**
 * Import an agent module for the worker CLI: its default export (or an export named `agent`) must
 * be a rollout() agent, a LitAgent instance, a plain rollout function, or a LitAgent subclass
 * (instantiated with no arguments). TypeScript modules (.ts, .mts, .cts, .tsx) load as they are,
 * through tsx; a module that fails to load is reported with its file and line.
 */
export async function loadAgent(modulePath: string): Promise<AgentLike> {
  const isUrl = /^[a-z][a-z0-9+.-]+:/i.test(modulePath) && !/^[a-z]:[\\/]/i.test(modulePath);
  const file = isUrl
    ? modulePath.startsWith("file:")
      ? fileURLToPath(modulePath)
      : modulePath
    : resolve(process.cwd(), modulePath);
  if (!isUrl || modulePath.startsWith("file:")) {
    if (!existsSync(file)) throw new AgentModuleError(file, `agent module not found: ${file}`);
    if (statSync(file).isDirectory()) {
      throw new AgentModuleError(file, `agent module is a directory, not a file: ${file}`);
    }
  }
  const url = isUrl ? modulePath : pathToFileURL(file).href;
  const mod = await importModule(url, file);
  let agent = mod.default ?? mod.agent;
  // A CommonJS module or a bundler's interop wrapper nests the real export one level down.
  if (agent && typeof agent === "object" && "default" in agent && Object.keys(agent).length === 1) {
    agent = (agent as { default: unknown }).default;
  }
  if (typeof agent === "function" && /^class[\s{]/.test(Function.prototype.toString.call(agent))) {
    agent = new (agent as new () => object)();
  }
  if (agent === undefined || agent === null || (typeof agent !== "function" && typeof agent !== "object")) {
    throw new InvalidArgumentError(
      "agent",
      `${modulePath} must export an agent as default (or as \`agent\`): a rollout() agent, a LitAgent, or a rollout function`,
    );
  }
  return agent as AgentLike;
}

async function importModule(url: string, file: string): Promise<Record<string, unknown>> {
  try {
    if (TYPESCRIPT.has(extname(file).toLowerCase())) {
      const { tsImport } = await import("tsx/esm/api");
      return (await tsImport(url, import.meta.url)) as Record<string, unknown>;
    }
    return (await import(url)) as Record<string, unknown>;
  } catch (error) {
    // Node reports a syntax error without its place; esbuild's parser names file:line:col.
    if (error instanceof SyntaxError && url.startsWith("file:")) throw await locateSyntaxError(file, error);
    throw explain(file, error);
  }
}

async function locateSyntaxError(file: string, error: SyntaxError): Promise<AgentModuleError> {
  try {
    const { transform } = await import("esbuild");
    const ext = extname(file).toLowerCase();
    await transform(readFileSync(file, "utf8"), {
      loader: TYPESCRIPT.has(ext) ? (ext === ".tsx" ? "tsx" : "ts") : "js",
      sourcefile: file,
      format: "esm",
      logLevel: "silent",
    });
  } catch (parseError) {
    return explain(file, parseError, error);
  }
  return explain(file, error);
}

/** `file:line:col: message` for transform errors (esbuild's own format), else the first frame in the file. */
function explain(file: string, error: unknown, original?: unknown): AgentModuleError {
  const message = error instanceof Error ? error.message : String(error);
  const located = /^(\S+?:\d+:\d+): ERROR: (.*)$/m.exec(message);
  if (located) {
    return new AgentModuleError(file, `agent module failed to load: ${located[1]}: ${located[2]}`, {
      cause: original ?? error,
    });
  }
  const stack = error instanceof Error ? (error.stack ?? "") : "";
  const frame = stack
    .split("\n")
    .map((line) => /\(?((?:file:\/\/)?\/[^\s()]+:\d+:\d+)\)?\s*$/.exec(line)?.[1])
    .find((f) => f?.includes(file) || f?.includes(pathToFileURL(file).pathname));
  const where = frame ? frame.replace(/^file:\/\//, "") : file;
  return new AgentModuleError(file, `agent module failed to load: ${where}: ${message}`, { cause: error });
}
