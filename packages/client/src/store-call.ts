/**
 * The request side of LightningStoreClient: one store call over the transport with its answer
 * validated, ids turned into path segments, and the fallback for servers without the batch routes.
 * Kept apart from store-client.ts so that file is only the LightningStore methods and their routes.
 */
import { InvalidArgumentError, invalidId, parseOrThrow, StoreClosedError } from "@agl/core";
import type { z } from "zod";
import { HttpError } from "./http/errors.js";
import type { StoreTransport } from "./http/transport.js";
import { AGL_SERVER_HEADER, type Shape } from "./http/trusted.js";

/**
 * An id as one path segment. Ids the store rejects (`.` and `..() => `, which URL normalisation would turn
 * into another route whatever their escaping, control characters, lone surrogates) fail here with the
 * store's own InvalidArgumentError instead of reaching a wrong route or throwing a URIError.
 */
export function enc(id: string, field: string): string {
  const problem = typeof id === "string" ? invalidId(id) : "must be a string";
  if (problem) throw new InvalidArgumentError(field, problem);
  return encodeURIComponent(id);
}

export class StoreCaller {
  private closed = false;
  /** Whether the server has the batch span routes (learned on first use). */
  private batchRoutes: boolean | undefined;

  constructor(private readonly http: StoreTransport) {}

  /**
   * One request; the answer is validated with `schema`. On the hot routes a `trusted` shape check
   * replaces the full zod parse when the answer comes from an agl store server (which built it from
   * objects its store already validated): re-parsing every span and rollout was ~40% of the
   * client's CPU. Answers from other servers (e.g. Python Agent Lightning) always get the full parse,
   * which also fills the defaults of fields they leave out.
   */
  async call<T>(
    schema: z.ZodType<T>,
    method: "get" | "post",
    route: string | (() => string),
    options: Parameters<StoreTransport["request"]>[2] = {},
    trusted?: Shape<T>,
  ): Promise<T> {
    if (this.closed) throw new StoreClosedError("LightningStoreClient is closed");
    // A lazy route builds its path (and checks its ids) here, so a bad id rejects like any other error.
    const path = typeof route === "string" ? route : route();
    let fromAgl = false;
    const onResponse = options.onResponse;
    const body = await this.http.request<unknown>(method, path, {
      ...options,
      onResponse: (res) => {
        fromAgl = res.header(AGL_SERVER_HEADER) !== null;
        onResponse?.(res);
      },
    });
    const what = `response of ${method.toUpperCase()} ${path}`;
    if (trusted && fromAgl) return trusted(body, what);
    return parseOrThrow(schema, body, what);
  }

  /**
   * Run a batch-route call; null when the server lacks the route (a 404/405 that is not a store
   * NotFoundError, e.g. a Python Agent Lightning server), remembered for later calls.
   */
  async batch<T>(fn: () => Promise<T>): Promise<T | null> {
    if (this.batchRoutes === false) return null;
    try {
      const result = await fn();
      this.batchRoutes = true;
      return result;
    } catch (error) {
      const missingRoute =
        HttpError.isInstance(error) &&
        (error.status === 405 || (error.status === 404 && error.errorType !== "NotFoundError"));
      if (!missingRoute || this.batchRoutes === true) throw error;
      this.batchRoutes = false;
      return null;
    }
  }

  /** Later calls reject with StoreClosedError; the transport's connections are released. */
  async close(): Promise<void> {
    this.closed = true;
    await this.http.close();
  }
}
