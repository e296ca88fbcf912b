import { mkdtempSync, rmSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { build } from "esbuild";
import { describe, expect, it } from "vitest";
import { AglError, InvalidArgumentError } from "../errors.js";
import { FunctionalLitAgent, LitAgent } from "./lit-agent.js";
import { rollout, toLitAgent } from "./rollout.js";
import type { RolloutContext } from "./types.js";

const ctx = { signal: new AbortController().signal } as unknown as RolloutContext;

describe("rollout()", () => {
  it("wraps a function into a LitAgent used for both modes", async () => {
    const agent = rollout(async function solve(task: number) {
      return task + 1;
    });
    expect(agent).toBeInstanceOf(FunctionalLitAgent);
    expect(LitAgent.isInstance(agent)).toBe(true);
    expect(agent.agentName).toBe("solve");
    expect(await agent.trainingRollout(1, ctx)).toBe(2);
    expect(await agent.validationRollout(2, ctx)).toBe(3);
  });

  it("toLitAgent accepts functions, LitAgents and objects with both methods, and rejects the rest", async () => {
    expect(await toLitAgent(async (t: number) => t * 3).trainingRollout(2, ctx)).toBe(6);
    const plain = {
      k: 5,
      trainingRollout(t: number) {
        return t + this.k;
      },
      validationRollout() {
        return 0;
      },
    };
    expect(await toLitAgent(plain).trainingRollout(1, ctx)).toBe(6);
    expect(() => toLitAgent({} as any)).toThrow(InvalidArgumentError);
    expect(() => toLitAgent(null as any)).toThrow(/agent/);
  });

  it("a LitAgent without an override fails clearly", () => {
    class Empty extends LitAgent {}
    expect(() => new Empty().trainingRollout(1, ctx)).toThrow(AglError);
    expect(() => new Empty().validationRollout(1, ctx)).toThrow(/Empty must override rollout/);
  });

  it("works as a standard decorator on a class method (compiled by esbuild)", async () => {
    const dir = mkdtempSync(join(fileURLToPath(new URL("../..", import.meta.url)), ".tmp-decorator-"));
    try {
      const outfile = join(dir, "agent.mjs");
      await build({
        entryPoints: [fileURLToPath(new URL("../../test/fixtures/decorated-agent.ts", import.meta.url))],
        bundle: true,
        platform: "node",
        format: "esm",
        target: "node20",
        outfile,
        alias: { "@agl/core": fileURLToPath(new URL("../index.ts", import.meta.url)) },
        packages: "external",
        tsconfigRaw: { compilerOptions: { experimentalDecorators: false } },
        logLevel: "silent",
      });
      const mod = await import(pathToFileURL(outfile).href);
      const instance = new mod.DecoratedAgent();
      // The method itself is unchanged and callable directly.
      expect(await instance.run("ab", { rollout: { mode: "val" } })).toBe(2);
      // Recognised by this copy of @agl/core too (a registered symbol, not module state).
      expect(typeof toLitAgent(instance).trainingRollout).toBe("function");
      const store = new mod.InMemoryLightningStore();
      await store.addResources({});
      const r = await store.enqueueRollout({ input: "hello", mode: "train" });
      const summary = await new mod.Runner({
        store,
        agent: instance,
        maxRollouts: 1,
        logger: mod.silentLogger,
      }).run();
      expect(summary.succeeded).toBe(1);
      expect(instance.calls).toEqual(["seen:ab:val", "seen:hello:train"]);
      const spans = (await store.querySpans(r.rollout_id)).items.filter(
        (s: { name: string }) => s.name !== "agent.rollout",
      );
      expect(spans.map((s: { name: string }) => s.name)).toEqual([
        "agentlightning.message",
        "agentlightning.operation",
        "agentlightning.annotation",
      ]);
      expect(spans[1].attributes).toMatchObject({
        "agentlightning.operation.name": "measure",
        "agentlightning.operation.input.text": "hello",
        "agentlightning.operation.output": 5,
      });
      expect(mod.findFinalReward(spans)).toBe(5);
      await store.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("rejects a static method as the rollout", () => {
    expect(() =>
      rollout(() => 1, { kind: "method", name: "x", static: true, addInitializer: () => {} } as any),
    ).toThrow(/instance method/);
  });
});
