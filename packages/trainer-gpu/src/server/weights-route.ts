import type { Context } from "hono";
import { z } from "zod";
import type { GenerationEngine } from "../generate/engine.js";
import type { CausalLM } from "../model/causal-lm.js";
import { parseJsonBody } from "./route-context.js";
import { HttpError } from "./schemas.js";

/**
 * `POST /update_weights_from_disk {"model_path": dir}` (SGLang's route): the server loads the checkpoint
 * a trainer wrote to `dir` and serves it as the next version. This is how a `PolicyServer` running in
 * its own process (or on another machine that sees the same disk) takes part in training as an external
 * engine: `externalEngine({ weightSync: new ReloadHookSync({ reload: ... }) })` writes each version and
 * posts its folder here. With a `VersionedEngine` the switch happens between requests without a stop
 * (requests in flight finish on the version they started on); with the default `Generator` running
 * sequences are drained first.
 */
export const UpdateWeightsRequestSchema = z.object({
  model_path: z.string().min(1).max(4096),
});

/** Loads the weights in a checkpoint folder (e.g. `(dir) => loadCheckpoint(dir).then((c) => c.model)`). */
export type WeightsLoader = (path: string) => Promise<CausalLM>;

/** Serialises updates: two publications must not interleave their loads and swaps. */
export class WeightsUpdater {
  private chain: Promise<unknown> = Promise.resolve();

  constructor(
    private readonly engine: GenerationEngine,
    private readonly load: WeightsLoader,
  ) {}

  /** Load `path` and serve it as the next version; resolves with that version. */
  update(path: string): Promise<number> {
    const next = this.chain.then(async () => {
      let loaded: CausalLM;
      try {
        loaded = await this.load(path);
      } catch (error) {
        throw new HttpError(
          400,
          `Cannot load weights from model_path: ${(error as Error).message}`,
          "model_path",
          "invalid_value",
        );
      }
      try {
        // Checked before any weight is copied: a partial copy would serve a mix of two versions.
        const mismatch = shapeMismatch(loaded, this.engine.policy);
        if (mismatch) throw new Error(mismatch);
        return await this.engine.swapWeights(loaded);
      } catch (error) {
        throw new HttpError(
          400,
          `The weights in model_path do not fit the served model: ${(error as Error).message}`,
          "model_path",
          "invalid_value",
        );
      } finally {
        loaded.dispose();
      }
    });
    this.chain = next.catch(() => {});
    return next;
  }
}

/** Why `loaded` cannot replace `served`'s weights, or null when its shapes match. */
function shapeMismatch(loaded: CausalLM, served: CausalLM): string | null {
  for (const key of ["vocabSize", "contextLength", "dModel"] as const) {
    if (loaded.config[key] !== served.config[key])
      return `${key} is ${loaded.config[key]}, the served model's is ${served.config[key]}`;
  }
  if (loaded.parameterCount !== served.parameterCount)
    return `${loaded.parameterCount} parameters, the served model has ${served.parameterCount}`;
  return null;
}

export async function updateWeightsFromDisk(updater: WeightsUpdater, c: Context): Promise<Response> {
  const body = await parseJsonBody(c, UpdateWeightsRequestSchema);
  const version = await updater.update(body.model_path);
  return c.json({ success: true, message: `serving version ${version}`, version });
}
