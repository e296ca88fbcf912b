/**
 * The docs' runnable TypeScript snippets typecheck against the packages as published: every fenced block
 * marked ```ts check in README.md, docs/*.md and the package/example READMEs is written out (its first
 * line `// name.ts` names the file; the blocks of one document share a folder, so `dev.ts` can import
 * `./agent.js`) and compiled with `tsc --noEmit`, strict, with `@agl/*` resolved to the built `dist/`
 * declarations. A snippet that uses a variable it never defines, or an option that does not exist,
 * fails here.
 */
import { execFile } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { afterAll, beforeAll, expect, it } from "vitest";

const run = promisify(execFile);
const root = fileURLToPath(new URL("../..", import.meta.url));
const PACKAGES = ["core", "client", "store", "adapter", "proxy", "trainer-gpu", "apo", "dashboard"];

function documents(): string[] {
  const docs = [join(root, "README.md")];
  for (const name of readdirSync(join(root, "docs")))
    if (name.endsWith(".md")) docs.push(join(root, "docs", name));
  for (const group of ["packages", "examples"]) {
    for (const name of readdirSync(join(root, group))) {
      const readme = join(root, group, name, "README.md");
      if (existsSync(readme)) docs.push(readme);
    }
  }
  return docs;
}

interface Snippet {
  doc: string;
  file: string;
  code: string;
}

function snippets(): Snippet[] {
  const out: Snippet[] = [];
  for (const doc of documents()) {
    const text = readFileSync(doc, "utf8");
    let n = 0;
    for (const m of text.matchAll(/^```ts check\n([\s\S]*?)^```/gm)) {
      const code = m[1]!;
      const named = /^\/\/ ([\w-]+\.ts)\b/.exec(code)?.[1];
      out.push({ doc: relative(root, doc), file: named ?? `snippet-${++n}.ts`, code });
    }
  }
  return out;
}

// Inside the repository (git-ignored .runs/) so that third-party imports (openai) resolve from its
// node_modules.
const dir = join(root, ".runs", `doc-snippets-${process.pid}`);
const found = snippets();

beforeAll(async () => {
  // The declarations the snippets compile against (CI has built everything already; then a no-op).
  await run(process.execPath, [join(root, "scripts/build-stale.mjs"), ...PACKAGES.map((p) => `@agl/${p}`)], {
    cwd: root,
    timeout: 900_000,
  });
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  const files: string[] = [];
  for (const s of found) {
    const folder = join(dir, s.doc.replace(/[^\w]+/g, "_"));
    mkdirSync(folder, { recursive: true });
    writeFileSync(join(folder, s.file), s.code);
    files.push(relative(dir, join(folder, s.file)));
  }
  writeFileSync(join(dir, "package.json"), JSON.stringify({ type: "module" }));
  const paths: Record<string, string[]> = {};
  for (const p of PACKAGES) {
    const manifest = JSON.parse(readFileSync(join(root, "packages", p, "package.json"), "utf8"));
    for (const [sub, entry] of Object.entries(manifest.exports as Record<string, { types: string }>)) {
      paths[`@agl/${p}${sub === "." ? "" : sub.slice(1)}`] = [join(root, "packages", p, entry.types)];
    }
  }
  writeFileSync(
    join(dir, "tsconfig.json"),
    JSON.stringify({
      compilerOptions: {
        target: "ES2022",
        lib: ["ES2023", "DOM"],
        module: "ESNext",
        moduleResolution: "Bundler",
        strict: true,
        skipLibCheck: true,
        noEmit: true,
        types: ["node"],
        typeRoots: [join(root, "node_modules/@types")],
        paths,
      },
      files,
    }),
  );
}, 900_000);

afterAll(() => rmSync(dir, { recursive: true, force: true }));

it("finds the checked snippets: the README's project files and the external-engine walk-through", () => {
  expect(found.map((s) => `${s.doc}:${s.file}`)).toEqual(
    expect.arrayContaining(["README.md:agent.ts", "README.md:dev.ts", "docs/external-engine.md:train.ts"]),
  );
});

it("every checked snippet typechecks (strict) against the built packages", async () => {
  const tsc = join(root, "node_modules/typescript/bin/tsc");
  const result = await run(process.execPath, [tsc, "-p", dir], { cwd: dir, timeout: 300_000 }).catch(
    (error: { stdout?: string; stderr?: string }) => error,
  );
  const output = `${result.stdout ?? ""}${result.stderr ?? ""}`.replaceAll(`${dir}/`, "");
  expect(output).toBe("");
}, 300_000);
