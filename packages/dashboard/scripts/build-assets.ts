/** Build the dashboard's browser bundle into dist/assets (run by `pnpm build` after tsup). */
import { fileURLToPath } from "node:url";
import { buildDashboardAssets } from "../src/build/build-assets.js";

const packageDir = fileURLToPath(new URL("..", import.meta.url));
const result = await buildDashboardAssets({ outDir: `${packageDir}/dist/assets` });
process.stdout.write(
  `dashboard assets: ${result.files.map((f) => `${f.name} ${(f.bytes / 1024).toFixed(1)} KiB (gzip ${(f.gzipBytes / 1024).toFixed(1)} KiB)`).join(", ")}\n`,
);
