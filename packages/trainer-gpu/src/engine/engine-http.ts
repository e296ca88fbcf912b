// HTTP calls to an engine's control routes, shared by the weight syncs (not part of the package's API).
import { WeightSyncError } from "./weight-sync.js";

/**
 * POST a JSON body to an engine's control route (bearer `apiKey`, default timeout 120 s: loading moves
 * weights to the GPU); a failure to get any answer is a `WeightSyncError`. Resolves with the response and
 * its text, whatever the status.
 */
export async function postToEngine(
  url: string,
  body: Record<string, unknown>,
  options: { apiKey?: string | null; timeoutMs?: number } = {},
): Promise<{ res: Response; text: string }> {
  let res: Response;
  try {
    res = await fetch(url, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        ...(options.apiKey ? { authorization: `Bearer ${options.apiKey}` } : {}),
      },
      body: JSON.stringify(body),
      signal: AbortSignal.timeout(options.timeoutMs ?? 120_000),
    });
  } catch (error) {
    throw new WeightSyncError(`POST ${url} failed: ${(error as Error).message}`, null, null, {
      cause: error,
    });
  }
  return { res, text: await res.text() };
}

/** The root of an engine's routes, whether its URL was given with or without the trailing `/v1`. */
export function engineRoot(url: string): string {
  return url.replace(/\/+$/, "").replace(/\/v1$/, "");
}
