import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { silentLogger } from "@agl/core";
import { afterEach, expect, it } from "vitest";
import { runApoAgent } from "./run.js";

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

it("optimises the agent's system prompt against the mock server, from reward 0 to 1", async () => {
  const dir = mkdtempSync(join(tmpdir(), "apo-agent-"));
  dirs.push(dir);
  const { result, history, mock } = await runApoAgent({
    model: "mock-model",
    gradientModel: "mock-critic",
    editModel: "mock-editor",
    rounds: 2,
    beamWidth: 2,
    branchFactor: 2,
    gradientBatchSize: 4,
    valBatchSize: 8,
    trainSize: 8,
    valSize: 8,
    runners: 1,
    db: join(dir, "apo.db"),
    runId: "example",
    logger: silentLogger,
  });
  expect(mock).toBe(true);
  expect(result.initialScore).toBe(0);
  expect(result.best.score).toBe(1);
  expect(result.best.template.template).toMatch(/^You are a friendly assistant/);
  expect(history).toContain('APO run "example" (prompt resource "system_prompt")');
  expect(history).toContain("+Reply with only the number, nothing else.");
});
