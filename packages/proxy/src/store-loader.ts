import { InMemoryLightningStore } from "@agl/core";
import type { SpanSink } from "./options.js";

type Closable = SpanSink & { close?(): Promise<void> };

/**
 * The store the CLI records into. @agl/proxy does not depend on @agl/store or @agl/client (layering: the
 * gateway runs next to the trainer or on its own box, and must not pull native database drivers), so the
 * CLI loads them at run time only when the user asks for them:
 *  - `http(s)://...`      → `LightningStoreClient` from @agl/client (a remote store server)
 *  - `memory:`             → the in-memory store of @agl/core (spans live as long as the process)
 *  - `sqlite:PATH`, a path, `postgres://...` → `openStore` from @agl/store
 *  - `--store-module X`   → `X` exports `createStore(uri)` (or a default function) returning any LightningStore
 */
export async function loadStore(
  uri: string,
  options: { module?: string; token?: string | null } = {},
): Promise<Closable> {
  if (options.module) {
    const mod = await importOptional(options.module);
    const factory = mod.createStore ?? mod.default;
    if (typeof factory !== "function") {
      throw new Error(`--store-module ${options.module} must export createStore(uri) or a default function`);
    }
    return check(await factory(uri), options.module);
  }
  if (/^https?:\/\//i.test(uri)) {
    const { LightningStoreClient } = await importOptional("@agl/client");
    return check(new LightningStoreClient({ url: uri, token: options.token ?? null }), "@agl/client");
  }
  if (/^memory(:(\/\/)?)?$/.test(uri)) return new InMemoryLightningStore();
  const { openStore } = await importOptional("@agl/store");
  return check(await openStore(uri), "@agl/store");
}

async function importOptional(specifier: string): Promise<any> {
  try {
    // a variable specifier keeps bundlers and the type checker from making this a static dependency
    const spec = specifier;
    return await import(spec);
  } catch (error) {
    if (
      (error as any)?.code === "ERR_MODULE_NOT_FOUND" &&
      String((error as Error).message).includes(specifier)
    ) {
      throw new Error(
        `${specifier} is not installed; install it next to @agl/proxy to use this --store (npm i ${specifier})`,
      );
    }
    throw error;
  }
}

function check(store: any, from: string): Closable {
  if (typeof store?.addSpan !== "function" || typeof store?.getNextSpanSequenceId !== "function") {
    throw new Error(`${from} did not give a LightningStore (addSpan/getNextSpanSequenceId missing)`);
  }
  return store;
}
