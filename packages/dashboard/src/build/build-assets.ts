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

/**
 * zod's namespace object re-exports every error-message locale (~50 files, a third of zod's bytes),
 * and the `z` namespace keeps them all alive. The page only shows English messages: keep `en`.
 */
const englishOnlyZod: Plugin = {
  name: "agl-zod-english-only",
  setup(b) {
    b.onLoad({ filter: /[\\/]zod[\\/]v4[\\/]locales[\\/]index\.js$/ }, () => ({
      loader: "js",
      contents: 'export { default as en } from "./en.js";',
    }));
  },
};

export async function buildDashboardAssets(
  options: BuildAssetsOptions,
): Promise<{ files: BuiltFile[]; byPackage: Record<string, number> }> {
  const { outDir, minify = true } = options;
  await rm(outDir, { recursive: true, force: true });
  await mkdir(outDir, { recursive: true });
  const result = await build({
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
    plugins: [browserSafeCore, englishOnlyZod],
    logLevel: "warning",
    metafile: true,
  });
  await copyFile(`${srcDir}app/index.html`, `${outDir}/index.html`);
  const files: BuiltFile[] = [];
  for (const name of ["index.html", "app.js", "app.css"]) {
    const bytes = await readFile(`${outDir}/${name}`);
    files.push({ name, bytes: bytes.length, gzipBytes: gzipSync(bytes, { level: 9 }).length });
  }
  // Bytes per source package in the bundle, for the bench's size breakdown.
  const byPackage: Record<string, number> = {};
  for (const output of Object.values(result.metafile.outputs)) {
    for (const [path, input] of Object.entries(output.inputs)) {
      const pkg =
        /node_modules\/(?:\.pnpm\/[^/]+\/node_modules\/)?((?:@[^/]+\/)?[^/]+)/.exec(path)?.[1] ??
        (/packages\/([^/]+)\//.exec(path)?.[1] ? `@agl/${/packages\/([^/]+)\//.exec(path)![1]}` : path);
      byPackage[pkg] = (byPackage[pkg] ?? 0) + input.bytesInOutput;
    }
  }
  await writeFile(`${outDir}/build.json`, JSON.stringify({ files, byPackage }, null, 2));
  return { files, byPackage };
}
