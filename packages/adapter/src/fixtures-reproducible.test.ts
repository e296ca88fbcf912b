/**
 * The committed fixtures must be what scripts/generate-fixtures.ts produces today: a library upgrade or a
 * generator edit that changes what the libraries record fails here until the fixtures are regenerated
 * (`pnpm --filter @agl/adapter fixtures`), instead of the other tests silently checking stale spans.
 *
 * The generator runs into a temp dir (its families run concurrently, ~5 s). Span and trace ids, times and
 * the server's `created` stamps differ on every run, so they are left out; everything else is compared.
 */
import { spawn } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import type { Span } from "@agl/core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { looksLikeLlmCall, readLlmCall } from "./readers/index.js";

const committedDir = fileURLToPath(new URL("../test/fixtures/", import.meta.url));
const script = fileURLToPath(new URL("../scripts/generate-fixtures.ts", import.meta.url));
const repoRoot = fileURLToPath(new URL("../../../", import.meta.url));

interface Fixture {
  family: string;
  versions: Record<string, string>;
  exchanges: unknown[];
  spans: Span[];
}

/** Keys whose values change from run to run (ids, clocks, throughput); dropped at any depth. */
const VOLATILE = new Set([
  "spanId",
  "startTime",
  "endTime",
  "created",
  "timestamp",
  "ai.response.timestamp",
  "ai.response.msToFirstChunk",
  "ai.response.msToFinish",
  "ai.response.avgOutputTokensPerSecond",
]);

function stable(value: unknown): unknown {
  return JSON.parse(JSON.stringify(value, (key, v) => (VOLATILE.has(key) ? undefined : v)));
}

/** What the tests rely on: the normalised calls, the wire exchanges and the span tree's shape. */
function essence(fixture: Fixture) {
  const byId = new Map(fixture.spans.map((s) => [s.span_id, s.name]));
  const calls = fixture.spans
    .filter(looksLikeLlmCall)
    .sort((a, b) => a.start_time! - b.start_time!)
    .map((s) => readLlmCall(s));
  return stable({
    family: fixture.family,
    versions: fixture.versions,
    exchanges: fixture.exchanges,
    calls,
    tree: fixture.spans.map((s) => [s.name, s.parent_id === null ? null : (byId.get(s.parent_id) ?? "?")]),
  });
}

const load = (dir: string, file: string): Fixture => JSON.parse(readFileSync(join(dir, file), "utf8"));

describe("committed fixtures are reproducible from scripts/generate-fixtures.ts", () => {
  let outDir = "";
  let log = "";

  beforeAll(async () => {
    outDir = mkdtempSync(join(tmpdir(), "agl-fixtures-"));
    // tsx's loader in this process rather than its CLI, which would add one more node process
    const tsx = pathToFileURL(createRequire(import.meta.url).resolve("tsx")).href;
    const code = await new Promise<number | null>((done) => {
      const child = spawn(process.execPath, ["--import", tsx, script, "--out", outDir], {
        cwd: repoRoot, // tsx takes the @agl/* path aliases from the root tsconfig.json
        stdio: ["ignore", "pipe", "pipe"],
      });
      child.stdout.on("data", (d) => {
        log += d;
      });
      child.stderr.on("data", (d) => {
        log += d;
      });
      child.on("close", done);
    });
    if (code !== 0) throw new Error(`generator failed (exit ${code}):\n${log}`);
  });

  afterAll(() => {
    if (outDir) rmSync(outDir, { recursive: true, force: true });
  });

  it("writes the same set of fixture files", () => {
    const list = (dir: string) =>
      readdirSync(dir)
        .filter((f) => f.endsWith(".json"))
        .sort();
    expect(list(outDir)).toEqual(list(committedDir));
    expect(list(committedDir).length).toBeGreaterThanOrEqual(8);
  });

  it("each regenerated fixture normalises to the committed one (calls, exchanges, tree, versions)", () => {
    for (const file of readdirSync(committedDir).filter((f) => f.endsWith(".json"))) {
      const fresh = load(outDir, file);
      const committed = load(committedDir, file);
      expect(fresh.spans.length, file).toBeGreaterThan(0);
      expect(essence(fresh), file).toEqual(essence(committed));
    }
  });
});
