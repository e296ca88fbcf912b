import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ReloadHookSync } from "../engine/reload-hook-sync.js";
import { updateWeightsFromDisk } from "../engine/update-weights-hook.js";
import { WeightSyncError } from "../engine/weight-sync.js";
import { Generator } from "../generate/generator.js";
import { loadCheckpoint, saveCheckpoint } from "../model/checkpoint.js";
import { PolicyModel } from "../model/policy-model.js";
import { tinySetup } from "../test-support/tiny.js";
import { PolicyServer } from "./policy-server.js";
import { VersionedEngine } from "./version-publication.js";

/**
 * `POST /update_weights_from_disk`: a PolicyServer in its own process takes new weights from a folder the
 * trainer wrote. The served tokens after an update are exactly what the new weights alone produce; bad
 * requests get 4xx naming the field and leave the served weights and version untouched.
 */
type Setup = Awaited<ReturnType<typeof tinySetup>>;
let s: Setup;
let other: PolicyModel;
let dir: string;
let engine: VersionedEngine;
let server: PolicyServer<VersionedEngine>;
const KEY = "engine-secret";
const params = { seed: 5, maxTokens: 10, ignoreEos: true, temperature: 1 };

async function reference(model: PolicyModel): Promise<number[]> {
  const promptIds = s.template.encodeChat([{ role: "user", content: "hi" }]).ids;
  return (
    await new Generator(model.clone({ trainable: false }), s.tokenizer).generate({ ...params, promptIds })
  ).tokenIds;
}

async function sample(): Promise<{ ids: number[]; version: string | null }> {
  const res = await fetch(`${server.baseUrl}/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${KEY}` },
    body: JSON.stringify({
      model: "engine",
      messages: [{ role: "user", content: "hi" }],
      seed: params.seed,
      max_tokens: params.maxTokens,
      ignore_eos: true,
      temperature: 1,
      return_token_ids: true,
    }),
  });
  const body = (await res.json()) as { choices: Array<{ token_ids: number[] }> };
  return { ids: body.choices[0]!.token_ids, version: res.headers.get("x-agl-model-version") };
}

function post(body: unknown, key: string | null = KEY): Promise<Response> {
  return fetch(`${server.url}/update_weights_from_disk`, {
    method: "POST",
    headers: { "content-type": "application/json", ...(key ? { authorization: `Bearer ${key}` } : {}) },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
}

beforeAll(async () => {
  s = await tinySetup(21);
  other = (await tinySetup(99)).model;
  dir = mkdtempSync(join(tmpdir(), "agl-weights-route-"));
  engine = new VersionedEngine(s.model, s.tokenizer);
  server = new PolicyServer({
    model: s.model,
    tokenizer: s.tokenizer,
    template: s.template,
    generator: engine,
    modelName: "engine",
    apiKey: KEY,
    loadWeights: async (path) => (await loadCheckpoint(path)).model,
  });
  await server.start();
});

afterAll(async () => {
  await server?.stop();
  engine?.dispose();
  rmSync(dir, { recursive: true, force: true });
});

describe("POST /update_weights_from_disk", () => {
  it("serves the folder's weights as the next version, token for token", async () => {
    const before = await sample();
    expect(before.version).toBe("0");
    expect(before.ids).toEqual(await reference(s.model));
    await saveCheckpoint(join(dir, "v1"), other, { tokenizer: s.tokenizer, template: s.template });
    const res = await post({ model_path: join(dir, "v1") });
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ success: true, version: 1 });
    const after = await sample();
    expect(after.version).toBe("1");
    expect(after.ids).toEqual(await reference(other));
    expect(after.ids).not.toEqual(before.ids);
  });

  it("rejects bad requests with 4xx naming the field and keeps serving the same weights", async () => {
    const served = await sample();
    expect((await post({ model_path: join(dir, "v1") }, null)).status).toBe(401);
    expect((await post({ model_path: join(dir, "v1") }, "wrong")).status).toBe(401);
    const notJson = await post("{");
    expect(notJson.status).toBe(400);
    const missing = await post({});
    expect(missing.status).toBe(400);
    expect(((await missing.json()) as { error: { param: string } }).error.param).toBe("model_path");
    const absent = await post({ model_path: join(dir, "nowhere") });
    expect(absent.status).toBe(400);
    expect(((await absent.json()) as { error: { param: string } }).error.param).toBe("model_path");
    // Another architecture: refused before a single weight is copied.
    const wide = PolicyModel.create({
      vocabSize: s.tokenizer.vocabSize,
      dModel: 16,
      nLayers: 1,
      nHeads: 2,
      contextLength: 128,
      seed: 3,
    });
    await saveCheckpoint(join(dir, "wide"), wide, { tokenizer: s.tokenizer, template: s.template });
    wide.dispose();
    const mismatch = await post({ model_path: join(dir, "wide") });
    expect(mismatch.status).toBe(400);
    expect(((await mismatch.json()) as { error: { message: string } }).error.message).toMatch(/dModel/);
    expect(await sample()).toEqual(served);
    expect(server.version).toBe(Number(served.version));
  });

  it("is what ReloadHookSync's updateWeightsFromDisk hook drives; a refused load is a WeightSyncError", async () => {
    const sync = new ReloadHookSync({
      checkpointDir: join(dir, "sync"),
      servedModel: "engine",
      reload: updateWeightsFromDisk({ url: server.baseUrl, apiKey: KEY }),
    });
    const v = server.version;
    expect(await sync.sync({ model: s.model, tokenizer: s.tokenizer, template: s.template }, v + 1)).toBe(
      "engine",
    );
    expect(server.version).toBe(v + 1);
    expect((await sample()).ids).toEqual(await reference(s.model));
    const refused = updateWeightsFromDisk({ url: server.url, apiKey: "wrong" });
    const error = await refused({ dir: join(dir, "v1"), version: 9, policy: s }).catch((e: unknown) => e);
    expect(WeightSyncError.isInstance(error)).toBe(true);
    expect((error as WeightSyncError).status).toBe(401);
  });
});
