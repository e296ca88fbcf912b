import { engineRoot, postToEngine } from "./engine-http.js";
import type { ReloadInfo } from "./reload-hook-sync.js";
import { WeightSyncError } from "./weight-sync.js";

export interface UpdateWeightsFromDiskOptions {
  /** The engine's root or OpenAI base URL (a trailing `/v1` is dropped). */
  url: string;
  apiKey?: string;
  /** The path the engine reads a folder at, when it sees this disk elsewhere. Default: the local path. */
  enginePath?: (localDir: string) => string;
  /** Per update (default 120 s). */
  timeoutMs?: number;
}

/**
 * A `ReloadHookSync` hook for engines with SGLang's `POST /update_weights_from_disk {"model_path"}`:
 * SGLang itself, or a `PolicyServer` started with `loadWeights` in its own process. The engine keeps its
 * served model name, so the hook resolves with nothing.
 */
export function updateWeightsFromDisk(
  options: UpdateWeightsFromDiskOptions,
): (info: ReloadInfo) => Promise<undefined> {
  const root = engineRoot(options.url);
  return async ({ dir }) => {
    const url = `${root}/update_weights_from_disk`;
    const { res, text } = await postToEngine(url, { model_path: options.enginePath?.(dir) ?? dir }, options);
    // SGLang answers 200 with {"success": false} when the load failed.
    let success = res.ok;
    try {
      success &&= (JSON.parse(text) as { success?: unknown }).success !== false;
    } catch {
      // A non-JSON 2xx counts as done.
    }
    if (!success) throw new WeightSyncError(`POST ${url} → ${res.status}: ${text}`, res.status, text);
    return undefined;
  };
}
