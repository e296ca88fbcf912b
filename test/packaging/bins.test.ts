/**
 * Every CLI a package declares in `bin` is a committed, executable launcher that imports a tsup entry:
 * pnpm links bins at install time, before anything is built, and a bin pointing into dist/ made a fresh
 * `pnpm install` print one "Failed to create bin" warning per link (24 of them).
 */
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const root = fileURLToPath(new URL("../..", import.meta.url));
const packages = readdirSync(join(root, "packages")).map((name) => join(root, "packages", name));

describe("package bins", () => {
  const withBins = packages
    .map((dir) => ({ dir, manifest: JSON.parse(readFileSync(join(dir, "package.json"), "utf8")) }))
    .filter(({ manifest }) => manifest.bin);

  it("the packages that ship CLIs are the ones expected", () => {
    expect(withBins.flatMap(({ manifest }) => Object.keys(manifest.bin)).sort()).toEqual([
      "agl-apo",
      "agl-dashboard",
      "agl-proxy",
      "agl-relay-worker",
      "agl-store",
      "agl-worker",
    ]);
  });

  for (const { dir, manifest } of withBins) {
    for (const [name, target] of Object.entries(manifest.bin as Record<string, string>)) {
      it(`${name}: an executable launcher outside dist/, shipped, importing a built entry`, () => {
        expect(target).not.toMatch(/dist\//);
        const file = join(dir, target);
        const mode = statSync(file).mode;
        expect(mode & 0o111).toBe(0o111);
        const text = readFileSync(file, "utf8");
        expect(text.startsWith("#!/usr/bin/env node\n")).toBe(true);
        const imported = /^import "\.\.\/dist\/([\w-]+)\.js";$/m.exec(text)?.[1];
        expect(imported).toBeDefined();
        const tsup = readFileSync(join(dir, "tsup.config.ts"), "utf8");
        expect(tsup).toContain(`"src/${imported}.ts"`);
        expect(manifest.files).toContain(target.replace(/^\.\//, "").split("/")[0]);
      });
    }
  }
});
