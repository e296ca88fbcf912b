import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describeStoreConformance, describeStoreModel } from "@agl/core/testing";
import { SqliteLightningStore } from "@agl/store";
import { remoteFactory } from "./support.js";

const factory = remoteFactory(async () => {
  const dir = mkdtempSync(join(tmpdir(), "agl-http-sqlite-"));
  return {
    store: new SqliteLightningStore(join(dir, "store.db")),
    cleanup: async () => rmSync(dir, { recursive: true, force: true }),
  };
});

describeStoreConformance("LightningStoreClient → server → SQLite", factory);
describeStoreModel("LightningStoreClient → server → SQLite", factory, { numRuns: 20 });
