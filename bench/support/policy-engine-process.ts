/**
 * A PolicyServer in its own process, as PPO's external inference engine (bench/async-ppo.ts): it loads the
 * initial weights from a checkpoint folder, serves them from a `VersionedEngine`, and takes each new
 * version from the folder the trainer posts to `POST /update_weights_from_disk` (requests in flight finish
 * on the version they started on).
 *
 *   AGL_ENGINE_API_KEY=... tsx bench/support/policy-engine-process.ts <checkpoint dir> [model name]
 *
 * Prints the server's root URL on stdout and runs until stdin closes.
 */
import { loadCheckpoint, PolicyServer, selectBackend, VersionedEngine } from "@agl/trainer-gpu";

const [dir, modelName = "policy"] = process.argv.slice(2);
if (!dir) throw new Error("usage: policy-engine-process.ts <checkpoint dir> [model name]");
await selectBackend({ backend: process.env.AGL_TF_BACKEND ?? "wasm", log: () => {} });
const { model, tokenizer, template } = await loadCheckpoint(dir);
const engine = new VersionedEngine(model, tokenizer);
const server = new PolicyServer({
  model,
  tokenizer,
  template,
  generator: engine,
  modelName,
  ...(process.env.AGL_ENGINE_API_KEY ? { apiKey: process.env.AGL_ENGINE_API_KEY } : {}),
  loadWeights: async (path) => (await loadCheckpoint(path)).model,
});
const { url } = await server.start();
console.log(url);
process.stdin.resume();
process.stdin.on("end", async () => {
  await server.stop();
  engine.dispose();
  model.dispose();
  process.exit(0);
});
