import { describeStoreConformance, describeStoreModel } from "@agl/core/testing";
import { PostgresLightningStore } from "@agl/store";
import { createTestDatabase } from "../support/postgres.js";
import { remoteFactory } from "./support.js";

const factory = remoteFactory(async () => {
  const db = await createTestDatabase();
  return { store: await PostgresLightningStore.connect(db.url), cleanup: db.drop };
});

describeStoreConformance("LightningStoreClient → server → PostgreSQL", factory, { timeScale: 2 });
describeStoreModel("LightningStoreClient → server → PostgreSQL", factory, { numRuns: 15 });
