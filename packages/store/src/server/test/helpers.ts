import { InMemoryLightningStore, type LightningStore } from "@agl/core";
import { silentServerLogger } from "../logging.js";
import { type StoreServer, type StoreServerOptions, startStoreServer } from "../server.js";

export interface Harness {
  store: LightningStore;
  server: StoreServer;
  /** fetch against the server; JSON bodies are stringified. Returns status, parsed body and headers. */
  call(
    method: string,
    path: string,
    body?: unknown,
    headers?: Record<string, string>,
  ): Promise<{ status: number; body: any; headers: Headers }>;
  close(): Promise<void>;
}

export async function harness(options: Partial<StoreServerOptions> = {}): Promise<Harness> {
  const store = options.store ?? new InMemoryLightningStore();
  const server = await startStoreServer({ port: 0, logger: silentServerLogger, ...options, store });
  return {
    store,
    server,
    async call(method, path, body, headers = {}) {
      const init: RequestInit = { method, headers: { ...headers } };
      if (body !== undefined) {
        init.body = typeof body === "string" ? body : JSON.stringify(body);
        (init.headers as Record<string, string>)["content-type"] ??= "application/json";
      }
      const res = await fetch(`${server.url}${path}`, init);
      const text = await res.text();
      let parsed: unknown = text;
      try {
        parsed = text === "" ? null : JSON.parse(text);
      } catch {
        // Not JSON: keep the text.
      }
      return { status: res.status, body: parsed, headers: res.headers };
    },
    async close() {
      await server.close();
      await store.close();
    },
  };
}
