import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describeStoreConformance, describeStoreModel } from "@agl/core/testing";
import { SqliteLightningStore } from "./sqlite-store.js";

function tmpFile(): { path: string; cleanup: () => Promise<void> } {
  const dir = mkdtempSync(join(tmpdir(), "agl-sqlite-"));
  return { path: join(dir, "store.db"), cleanup: async () => rmSync(dir, { recursive: true, force: true }) };
}

const factory = async () => {
  const { path, cleanup } = tmpFile();
  return { store: new SqliteLightningStore(path), cleanup };
};

describeStoreConformance("SqliteLightningStore", factory);
describeStoreModel("SqliteLightningStore", factory, { numRuns: 60 });
