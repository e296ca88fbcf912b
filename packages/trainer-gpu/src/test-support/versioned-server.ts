import type { PolicyModel } from "../model/policy-model.js";
import { PolicyServer } from "../server/policy-server.js";
import { VersionedEngine, type VersionedEngineOptions } from "../server/version-publication.js";
import { tinySetup } from "./tiny.js";

/**
 * A started PolicyServer (model name "policy") over a `VersionedEngine` of a tiny model, with two weight
 * sets to publish: `other` (a differently seeded model) and `original` (a frozen copy of the served
 * weights). `stop()` stops the server and frees the engine's snapshots.
 */
export async function versionedServer(options: VersionedEngineOptions = {}) {
  const s = await tinySetup(21);
  const other = (await tinySetup(99)).model;
  const original = s.model.clone({ trainable: false }) as PolicyModel;
  const engine = new VersionedEngine(s.model, s.tokenizer, options);
  const server = new PolicyServer({
    model: s.model,
    tokenizer: s.tokenizer,
    template: s.template,
    generator: engine,
    modelName: "policy",
  });
  await server.start();
  const stop = async () => {
    await server.stop();
    engine.dispose();
  };
  return { s, other, original, engine, server, stop };
}

export type VersionedServer = Awaited<ReturnType<typeof versionedServer>>;
