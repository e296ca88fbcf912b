/**
 * A soak worker process: a Runner over the HTTP store client, until killed.
 *   node --import tsx test/reliability/soak-worker.ts <store url>
 */
import { LightningStoreClient } from "@agl/client";
import { consoleLogger, Runner } from "@agl/core";
import soakAgent from "./soak-agent.js";

const url = process.argv[2];
if (!url) {
  console.error("usage: soak-worker.ts <store url>");
  process.exit(2);
}
const store = new LightningStoreClient({ url, timeoutMs: 10_000, retryDelaysMs: [200, 500, 1000] });
const runner = new Runner({
  store,
  agent: soakAgent,
  concurrency: 4,
  pollIntervalMs: 50,
  heartbeatIntervalSeconds: 1,
  logger: consoleLogger("error"),
});
console.log("ready");
await runner.run();
