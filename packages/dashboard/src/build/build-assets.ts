/**
 * The browser bundle: Preact pages + @agl/adapter (triplets are computed in the browser from the spans
 * the store returns), minified by esbuild into one JS file, one CSS file and index.html. Used by the
 * package build and by the browser tests (which build into a temporary directory).
 */
import { copyFile, mkdir, readFile, rm, writeFile } from "node:fs/promises";
import { fileURLToPath } from "node:url";
import { gzipSync } from "node:zlib";
import { build, type Plugin } from "esbuild";

const srcDir = fileURLToPath(new URL("..", import.meta.url));
const packagesDir = fileURLToPath(new URL("../../..", import.meta.url));

export interface BuiltFile {
  name: string;
  bytes: number;
  gzipBytes: number;
}

export interface BuildAssetsOptions {
  outDir: string;
  /** Default true. */
  minify?: boolean;
}

/**
 * @agl/core's barrel also exports the tracer, runner and stores (node:async_hooks, node:crypto...). The
 * dashboard only reaches pure helpers (reward readers, conventions, errors), so core's modules are marked
 * side-effect free for tree shaking, and node builtins resolve to a stub that throws if ever called.
 */
const browserSafeCore: Plugin = {
  name: "agl-browser-safe-core",
  setup(b) {
    b.onResolve({ filter: /^node:/ }, (args) => ({ path: args.path, namespace: "node-builtin" }));
    b.onLoad({ filter: /.*/, namespace: "node-builtin" }, (args) => ({
      loader: "js",
      contents: `const unavailable = () => { throw new Error(${JSON.stringify(`${args.path} is not available in the browser`)}); };
module.exports = new Proxy({}, { get: (_, key) => (key === "__esModule" ? false : unavailable) });`,
    }));
    b.onResolve({ filter: /^\.\.?\// }, async (args) => {
      if (!args.importer.includes(`${packagesDir}core/src/`) || args.pluginData === "resolved") return;
      const resolved = await b.resolve(args.path, {
        resolveDir: args.resolveDir,
        kind: args.kind,
        importer: args.importer,
        pluginData: "resolved",
      });
      return { ...resolved, sideEffects: false };
    });
  },
};

export async function buildDashboardAssets(options: BuildAssetsOptions): Promise<{ files: BuiltFile[] }> {
  const { outDir, minify = true } = options;
  await rm(outDir, { recursive: true, force: true });
  await mkdir(outDir, { recursive: true });
  await build({
    entryPoints: { app: `${srcDir}app/main.tsx` },
    outdir: outDir,
    bundle: true,
    format: "esm",
    platform: "browser",
    target: ["chrome110", "firefox115", "safari16"],
    minify,
    sourcemap: false,
    legalComments: "none",
    jsx: "automatic",
    jsxImportSource: "preact",
    alias: {
      "@agl/adapter": `${packagesDir}adapter/src/index.ts`,
      "@agl/core": `${packagesDir}core/src/index.ts`,
    },
    define: { "process.env.NODE_ENV": '"production"' },
    plugins: [browserSafeCore],
    logLevel: "warning",
  });
  await copyFile(`${srcDir}app/index.html`, `${outDir}/index.html`);
  const files: BuiltFile[] = [];
  for (const name of ["index.html", "app.js", "app.css"]) {
    const bytes = await readFile(`${outDir}/${name}`);
    files.push({ name, bytes: bytes.length, gzipBytes: gzipSync(bytes, { level: 9 }).length });
  }
  await writeFile(`${outDir}/build.json`, JSON.stringify({ files }, null, 2));
  return { files };
}
