/**
 * The start-up check of a worker (and any CLI talking to a store server): one authenticated call that
 * tells a refused token (fail now, with the fix) from a store that is not up yet (retry with one line
 * per try, then fail naming the URL).
 */
import { AbortedError, AglError, isAuthFailure, type Logger, oneLine } from "@agl/core";
import { LightningStoreClient } from "./store-client.js";

/** The store server refused the credentials (HTTP 401/403). Retrying cannot help. */
export class StoreAuthError extends AglError {
  readonly status: number;
  constructor(url: string, status: number, options?: { cause?: unknown }) {
    super(
      status === 401
        ? `the store server at ${url} refused the request (401 Unauthorized): pass its token with --token or AGL_STORE_TOKEN (the server's --token / AGL_STORE_TOKEN)`
        : `the store server at ${url} refused the request (403 Forbidden): the token is valid but not allowed here; check which token the server was started with`,
      options,
    );
    this.name = "StoreAuthError";
    this.status = status;
  }
}

/** No usable answer from the store server within the start-up time. */
export class StoreUnreachableError extends AglError {
  constructor(url: string, seconds: number, last: unknown) {
    super(
      `could not reach the store server at ${url} within ${seconds} s: ${oneLine(last)}. Is agl-store running there (check --store)?`,
      { cause: last },
    );
    this.name = "StoreUnreachableError";
  }
}

/**
 * Check that the store server at `url` answers an authenticated call, retrying a store that is not up
 * (one log line per try, backing off up to 8 s) for `timeoutSeconds`. Throws StoreAuthError at once on
 * 401/403, StoreUnreachableError when time runs out.
 */
export async function probeStore(
  url: string,
  options: { token?: string | null; timeoutSeconds: number; logger: Logger; signal?: AbortSignal },
): Promise<void> {
  // Its own client without the transport's retries: this loop decides when to retry and says so.
  const client = new LightningStoreClient({
    url,
    token: options.token ?? null,
    retryDelaysMs: [],
    healthRetryDelaysMs: [],
    timeoutMs: 5000,
  });
  try {
    await probeLoop(client, options);
  } finally {
    await client.close();
  }
}

async function probeLoop(
  client: LightningStoreClient,
  options: { timeoutSeconds: number; logger: Logger; signal?: AbortSignal },
): Promise<void> {
  const started = Date.now();
  for (let attempt = 1; ; attempt++) {
    try {
      await client.statistics();
      if (attempt > 1) options.logger.info(`store server at ${client.url} answers`);
      return;
    } catch (error) {
      if (isAuthFailure(error)) throw new StoreAuthError(client.url, (error as { status: number }).status);
      const elapsed = (Date.now() - started) / 1000;
      const delay = Math.min(8, 0.5 * 2 ** (attempt - 1));
      if (elapsed + delay > options.timeoutSeconds) {
        throw new StoreUnreachableError(client.url, options.timeoutSeconds, error);
      }
      options.logger.warn(
        `store server at ${client.url} not reachable (try ${attempt}): ${oneLine(error)}; retrying in ${delay} s`,
      );
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(resolve, delay * 1000);
        options.signal?.addEventListener(
          "abort",
          () => {
            clearTimeout(timer);
            reject(AbortedError.fromSignal(options.signal!, "store probe"));
          },
          { once: true },
        );
      });
    }
  }
}
