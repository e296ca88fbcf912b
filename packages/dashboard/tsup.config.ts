import { defineConfig } from "tsup";

// The node side (static server, standalone CLI). The browser bundle is built by scripts/build-assets.ts.
export default defineConfig({
  entry: ["src/index.ts", "src/cli.ts"],
  format: ["esm"],
  dts: true,
  sourcemap: true,
  clean: true,
  target: "node20",
  splitting: true,
});
