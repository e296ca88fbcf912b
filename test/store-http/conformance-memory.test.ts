import { InMemoryLightningStore } from "@agl/core";
import { describeStoreConformance, describeStoreModel } from "@agl/core/testing";
import { remoteFactory } from "./support.js";

const factory = remoteFactory(async () => ({ store: new InMemoryLightningStore() }));

describeStoreConformance("LightningStoreClient → server → memory", factory);
describeStoreModel("LightningStoreClient → server → memory", factory, { numRuns: 25 });
