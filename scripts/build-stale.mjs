#!/usr/bin/env node
/**
 * Build a workspace package and the workspace packages it needs, skipping every one whose dist/ is newer
 * than its inputs: `node scripts/build-stale.mjs @agl/example-apo-agent` (several names allowed).
 * `pnpm build` rebuilds all packages every time; a command that runs one example needs only its own
 * dependency closure, and usually none of it changed since the last build.
 *
 * A package is stale when dist/ is missing or empty, or when a file under src/ or scripts/ (or its
 * package.json, tsup.config.ts, tsconfig.json) is newer than the oldest file in dist/. Bundles keep their
 * workspace dependencies external, so a rebuilt dependency does not make its dependents stale.
 * Plain Node (no tsx start-up): it runs before anything else in `pnpm apo`.
 */
import { spawnSync } from "node:child_process";
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const root = fileURLToPath(new URL("..", import.meta.url));
const INPUT_FILES = ["package.json", "tsup.config.ts", "tsconfig.json"];
const INPUT_DIRS = ["src", "scripts"];

/** Every workspace package by name: its directory and manifest. */
export function workspace() {
  const packages = new Map();
  for (const group of ["packages", "examples"]) {
    for (const name of readdirSync(join(root, group))) {
      const dir = join(root, group, name);
      const manifestPath = join(dir, "package.json");
      if (!existsSync(manifestPath)) continue;
      const manifest = JSON.parse(readFileSync(manifestPath, "utf8"));
      packages.set(manifest.name, { dir, manifest });
    }
  }
  return packages;
}

/** The packages `names` need (workspace dependencies and peers), dependencies before dependents. */
export function buildOrder(packages, names) {
  const order = [];
  const seen = new Set();
  const visit = (name, path) => {
    if (seen.has(name)) return;
    if (path.includes(name)) throw new Error(`dependency cycle: ${[...path, name].join(" -> ")}`);
    const pkg = packages.get(name);
    if (!pkg) throw new Error(`no workspace package named ${name}`);
    const { dependencies = {}, peerDependencies = {} } = pkg.manifest;
    for (const [dep, range] of Object.entries({ ...dependencies, ...peerDependencies })) {
      if (String(range).startsWith("workspace:")) visit(dep, [...path, name]);
    }
    seen.add(name);
    order.push(name);
  };
  for (const name of names) visit(name, []);
  return order;
}

function walk(dir, visitFile) {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) walk(path, visitFile);
    else visitFile(path);
  }
}

/** Why `dir` needs a build, or null when dist/ is up to date. */
export function staleReason(dir) {
  const dist = join(dir, "dist");
  if (!existsSync(dist)) return "no dist/";
  let oldestOutput = Number.POSITIVE_INFINITY;
  walk(dist, (file) => {
    oldestOutput = Math.min(oldestOutput, statSync(file).mtimeMs);
  });
  if (oldestOutput === Number.POSITIVE_INFINITY) return "dist/ is empty";
  let newest = { file: "", mtime: 0 };
  const consider = (file) => {
    const mtime = statSync(file).mtimeMs;
    if (mtime > newest.mtime) newest = { file, mtime };
  };
  for (const name of INPUT_FILES) if (existsSync(join(dir, name))) consider(join(dir, name));
  for (const name of INPUT_DIRS) if (existsSync(join(dir, name))) walk(join(dir, name), consider);
  return newest.mtime > oldestOutput ? `${newest.file.slice(dir.length + 1)} changed` : null;
}

function main(names) {
  if (names.length === 0) {
    process.stderr.write("usage: node scripts/build-stale.mjs <package name>...\n");
    process.exit(2);
  }
  const packages = workspace();
  const started = Date.now();
  let built = 0;
  for (const name of buildOrder(packages, names)) {
    const { dir, manifest } = packages.get(name);
    if (!manifest.scripts?.build) continue;
    const reason = staleReason(dir);
    if (!reason) continue;
    process.stderr.write(`build ${name} (${reason})\n`);
    const result = spawnSync("pnpm", ["run", "--silent", "build"], { cwd: dir, stdio: "inherit" });
    if (result.status !== 0) process.exit(result.status ?? 1);
    built++;
  }
  const skipped = buildOrder(packages, names).length - built;
  process.stderr.write(
    `built ${built} package(s), ${skipped} up to date, ${((Date.now() - started) / 1000).toFixed(1)} s\n`,
  );
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) main(process.argv.slice(2));
