/**
 * scripts/build-stale.mjs (what `pnpm apo`, `pnpm hello` and `pnpm main` run before starting): only the
 * packages a command needs, dependencies first, and none whose dist/ is newer than its inputs.
 */
import { mkdirSync, mkdtempSync, rmSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
// @ts-expect-error: a plain .mjs script without type declarations
import { buildOrder, staleReason, workspace } from "../../scripts/build-stale.mjs";

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

describe("build-stale", () => {
  it("the apo example needs 6 of the workspace's packages, each after its dependencies", () => {
    const order: string[] = buildOrder(workspace(), ["@agl/example-apo-agent"]);
    expect([...order].sort()).toEqual([
      "@agl/adapter",
      "@agl/apo",
      "@agl/core",
      "@agl/dashboard",
      "@agl/example-apo-agent",
      "@agl/store",
    ]);
    const comesBefore = (a: string, b: string) => expect(order.indexOf(a)).toBeLessThan(order.indexOf(b));
    comesBefore("@agl/core", "@agl/adapter");
    comesBefore("@agl/store", "@agl/apo");
    comesBefore("@agl/dashboard", "@agl/store"); // an optional peer that agl-store serves when installed
    comesBefore("@agl/apo", "@agl/example-apo-agent");
    expect(order).not.toContain("@agl/trainer-gpu");
  });

  it("an unknown package is an error naming it", () => {
    expect(() => buildOrder(workspace(), ["@agl/nope"])).toThrow(/no workspace package named @agl\/nope/);
  });

  it("stale without dist/, fresh when dist/ is newer than every input, stale again after an edit", () => {
    const dir = mkdtempSync(join(tmpdir(), "agl-stale-"));
    dirs.push(dir);
    mkdirSync(join(dir, "src/sub"), { recursive: true });
    writeFileSync(join(dir, "package.json"), "{}");
    writeFileSync(join(dir, "src/sub/a.ts"), "export {};");
    const t0 = new Date("2026-01-01T00:00:00Z");
    for (const f of ["package.json", "src/sub/a.ts"]) utimesSync(join(dir, f), t0, t0);
    expect(staleReason(dir)).toBe("no dist/");
    mkdirSync(join(dir, "dist"));
    expect(staleReason(dir)).toBe("dist/ is empty");
    writeFileSync(join(dir, "dist/index.js"), "");
    writeFileSync(join(dir, "dist/index.d.ts"), "");
    const t1 = new Date("2026-01-02T00:00:00Z");
    for (const f of ["dist/index.js", "dist/index.d.ts"]) utimesSync(join(dir, f), t1, t1);
    expect(staleReason(dir)).toBeNull();
    // One output older than an input (a build that died half-way) is stale too.
    const t2 = new Date("2026-01-03T00:00:00Z");
    utimesSync(join(dir, "src/sub/a.ts"), t2, t2);
    expect(staleReason(dir)).toBe("src/sub/a.ts changed");
  });
});
