import { LightningStoreClient } from "@agl/client";
import type { LightningStore } from "@agl/core";
import type { StoreFactory } from "@agl/core/testing";
import { type StoreServer, silentServerLogger, startStoreServer } from "@agl/store";

/**
 * Wrap a backend factory so each test talks to it through a real store server on loopback and a
 * LightningStoreClient (no retries, so a server error fails the test at once).
 */
export function remoteFactory(
  backend: () => Promise<{ store: LightningStore; cleanup?: () => Promise<void> }>,
): StoreFactory {
  return async () => {
    const { store, cleanup } = await backend();
    const server = await startStoreServer({ store, port: 0, logger: silentServerLogger });
    const client = new LightningStoreClient({ url: server.url, retryDelaysMs: [] });
    return {
      store: client,
      cleanup: async () => {
        await server.close();
        await store.close();
        await cleanup?.();
      },
    };
  };
}

export async function serve(
  store: LightningStore,
  options: Partial<Parameters<typeof startStoreServer>[0]> = {},
): Promise<StoreServer> {
  return startStoreServer({ store, port: 0, logger: silentServerLogger, ...options });
}
