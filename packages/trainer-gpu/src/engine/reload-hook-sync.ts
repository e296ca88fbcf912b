import { rm } from "node:fs/promises";
import { join, resolve } from "node:path";
import { saveCheckpoint } from "../model/checkpoint.js";
import { PolicyModel } from "../model/policy-model.js";
import type { PolicyBundle } from "../ppo/serving.js";
import { exportPretrained } from "../pretrained/export.js";
import { PretrainedModel } from "../pretrained/pretrained-model.js";
import { ChatTemplate } from "../tokenizer/chat-template.js";
import { Tokenizer } from "../tokenizer/tokenizer.js";
import { type WeightSync, WeightSyncError } from "./weight-sync.js";

export interface ReloadInfo {
  /** The checkpoint folder just written (Hugging Face layout for a loaded checkpoint). */
  dir: string;
  version: number;
  policy: PolicyBundle;
}

export interface ReloadHookSyncOptions {
  /** Where checkpoints are written, one folder per policy version (`version-{n}`). */
  checkpointDir: string;
  /**
   * Make the engine serve the checkpoint in `info.dir`, e.g. SGLang's
   * `POST /update_weights_from_disk {"model_path": dir}`, or restarting a vLLM replica on it.
   * Resolves with the model name to ask for from then on, or nothing to keep `servedModel`.
   */
  reload: (info: ReloadInfo) => Promise<string | undefined>;
  /** The model name the engine serves the initial weights under (its `--served-model-name`). */
  servedModel: string;
  /** Write and reload version 0 before the first rollout (default false: the engine was started on it). */
  reloadAtStart?: boolean;
  /** How many version folders to keep on disk (default 1; older ones are deleted after a reload). */
  keep?: number;
}

/**
 * Weight sync for full-weight training: after each update the whole policy is written as a checkpoint
 * (a Hugging Face folder, LoRA adapters merged, for a loaded checkpoint; the package's own format for
 * a `PolicyModel`), then the configured hook makes the engine load it.
 */
export class ReloadHookSync implements WeightSync {
  readonly kind = "reload-hook";
  private model: string;
  private readonly written: string[] = [];

  constructor(private readonly options: ReloadHookSyncOptions) {
    this.model = options.servedModel;
  }

  async start(policy: PolicyBundle): Promise<string> {
    if (this.options.reloadAtStart) return this.sync(policy, 0);
    return this.model;
  }

  async sync(policy: PolicyBundle, version: number): Promise<string> {
    const dir = resolve(join(this.options.checkpointDir, `version-${version}`));
    await writeFullCheckpoint(policy, dir);
    this.written.push(dir);
    let served: string | undefined;
    try {
      served = await this.options.reload({ dir, version, policy });
    } catch (error) {
      throw new WeightSyncError(
        `reload hook failed for version ${version} (${dir}): ${(error as Error).message}`,
        null,
        null,
        { cause: error },
      );
    }
    if (typeof served === "string" && served.length > 0) this.model = served;
    while (this.written.length > Math.max(1, this.options.keep ?? 1)) {
      await rm(this.written.shift()!, { recursive: true, force: true });
    }
    return this.model;
  }

  async close(): Promise<void> {}
}

/** The policy's full weights in the form an engine loads. */
export async function writeFullCheckpoint(policy: PolicyBundle, dir: string): Promise<void> {
  const model = policy.model;
  if (model instanceof PretrainedModel) {
    await exportPretrained(model, dir);
    return;
  }
  if (model instanceof PolicyModel) {
    const { tokenizer, template } = policy;
    if (!(tokenizer instanceof Tokenizer) || !(template instanceof ChatTemplate)) {
      throw new WeightSyncError(
        "ReloadHookSync: a PolicyModel checkpoint needs the character-level tokenizer",
      );
    }
    await saveCheckpoint(dir, model, { tokenizer, template });
    return;
  }
  throw new WeightSyncError("ReloadHookSync: the policy model can be neither exported nor checkpointed");
}
