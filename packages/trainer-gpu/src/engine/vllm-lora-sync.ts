import { rm } from "node:fs/promises";
import { join, resolve } from "node:path";
import type { PolicyBundle } from "../ppo/serving.js";
import { DEFAULT_ADAPTER } from "../pretrained/adapter-rows.js";
import { exportPeftAdapter } from "../pretrained/peft.js";
import { PretrainedModel } from "../pretrained/pretrained-model.js";
import { engineRoot, postToEngine } from "./engine-http.js";
import { type SyncOptions, type WeightSync, WeightSyncError } from "./weight-sync.js";

export interface VllmLoraSyncOptions {
  /** The vLLM server (started with `--enable-lora` and VLLM_ALLOW_RUNTIME_LORA_UPDATING=True). */
  url: string;
  apiKey?: string | null;
  /** Where adapter folders are written, one per policy version. */
  adapterDir: string;
  /**
   * The path the engine reads a folder at, when it sees this disk elsewhere (a shared volume mounted
   * at another path). Default: the local absolute path.
   */
  enginePath?: (localDir: string) => string;
  /**
   * Engine-side name of an adapter at a policy version: new per version, never reused. Default
   * `policy-v{version}` for the model's default adapter and `{adapter}-v{version}` for each named adapter
   * of a multi-adapter model (one policy per role, all loaded side by side over the engine's one base).
   */
  adapterName?: (version: number, adapter: string) => string;
  /** Hub id or path of the base model written into adapter_config.json (default: the loaded checkpoint). */
  baseModelNameOrPath?: string;
  /** Per request to the engine (default 120 s: loading moves weights to the GPU). */
  timeoutMs?: number;
}

/**
 * Weight sync for LoRA training on vLLM: each policy version is exported as a PEFT adapter folder and
 * loaded with `POST /v1/load_lora_adapter {lora_name, lora_path}` under a new name; once the proxy has
 * switched to it (rollouts are paused and drained meanwhile) the previous version is unloaded with
 * `POST /v1/unload_lora_adapter {lora_name}` and its folder deleted (under asynchronous training, one
 * version later: calls may still be running on it). Only the adapters travel; the engine keeps the base
 * weights it was started with. A model with several named adapters (one policy per role) has every
 * adapter loaded under its own name at each version; `servedModels()` maps them.
 */
export class VllmLoraSync implements WeightSync {
  readonly kind = "vllm-lora";
  private readonly root: string;
  /** Loaded engine names, per version, oldest first. */
  private readonly loaded: Array<Array<{ name: string; dir: string }>> = [];
  private current: Record<string, string> = {};

  constructor(private readonly options: VllmLoraSyncOptions) {
    this.root = engineRoot(options.url);
  }

  async start(policy: PolicyBundle): Promise<string> {
    return this.push(policy, 0);
  }

  async sync(policy: PolicyBundle, version: number, options: SyncOptions = {}): Promise<string> {
    const name = await this.push(policy, version);
    // The proxy asks for the new names from now on. Synchronous training drained every call: older
    // adapters can go. Asynchronous publication keeps the previous version for the calls still running on
    // it; by the next publication (a whole training step later) they have ended.
    while (this.loaded.length > (options.keepPrevious ? 2 : 1)) {
      for (const old of this.loaded.shift()!) {
        await this.post("unload_lora_adapter", { lora_name: old.name });
        await rm(old.dir, { recursive: true, force: true });
      }
    }
    return name;
  }

  /** Adapter (policy) name → the engine-side model name serving its current version. */
  servedModels(): Record<string, string> {
    return { ...this.current };
  }

  async close(): Promise<void> {
    for (const { name, dir } of this.loaded.splice(0).flat()) {
      await this.post("unload_lora_adapter", { lora_name: name }).catch(() => {});
      await rm(dir, { recursive: true, force: true });
    }
  }

  private async push(policy: PolicyBundle, version: number): Promise<string> {
    const model = policy.model;
    if (!(model instanceof PretrainedModel) || model.adapters.size === 0) {
      throw new WeightSyncError(
        "VllmLoraSync needs a loaded checkpoint with LoRA adapters (loadPretrained + applyLora); use ReloadHookSync for full weights",
      );
    }
    const batch: Array<{ name: string; dir: string }> = [];
    this.loaded.push(batch);
    const current: Record<string, string> = {};
    for (const adapter of model.adapterNames) {
      const name =
        this.options.adapterName?.(version, adapter) ??
        (adapter === DEFAULT_ADAPTER ? `policy-v${version}` : `${adapter}-v${version}`);
      const dir = resolve(join(this.options.adapterDir, name));
      await exportPeftAdapter(model, dir, {
        adapter,
        ...(this.options.baseModelNameOrPath
          ? { baseModelNameOrPath: this.options.baseModelNameOrPath }
          : {}),
      });
      await this.post("load_lora_adapter", {
        lora_name: name,
        lora_path: this.options.enginePath?.(dir) ?? dir,
      });
      batch.push({ name, dir });
      current[adapter] = name;
    }
    this.current = current;
    // The primary name: the default adapter's, else the first named adapter's.
    return current[DEFAULT_ADAPTER] ?? (batch[0] as { name: string }).name;
  }

  private async post(route: string, body: Record<string, unknown>): Promise<string> {
    const url = `${this.root}/v1/${route}`;
    const { res, text } = await postToEngine(url, body, this.options);
    if (!res.ok) {
      let message = text;
      try {
        const parsed = JSON.parse(text) as {
          error?: { message?: string };
          message?: string;
          detail?: unknown;
        };
        message =
          parsed.error?.message ??
          parsed.message ??
          (typeof parsed.detail === "string" ? parsed.detail : text);
      } catch {
        // vLLM answers errors in JSON; anything else is shown as is.
      }
      const hint =
        res.status === 404 && message === "Not Found"
          ? " (is the server started with VLLM_ALLOW_RUNTIME_LORA_UPDATING=True and --enable-lora?)"
          : "";
      throw new WeightSyncError(`POST ${url} → ${res.status}: ${message}${hint}`, res.status, text);
    }
    return text;
  }
}
