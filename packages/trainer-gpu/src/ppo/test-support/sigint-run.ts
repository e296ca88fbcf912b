// Test-only child process: train the tiny run with PPO's own signal handling; the parent sends SIGINT
// once a step-3 agent hangs. Prints "HANG" then one RESULT line (JSON).
import { silentLogger } from "@agl/core";
import { selectBackend } from "../../backend/select.js";
import { stepStatuses, tinyRun } from "./tiny-run.js";

const dir = process.argv[2]!;
// Plain Node (no vitest transform) cannot load tf-cpu.ts's directory import; selectBackend's own
// `@tensorflow/tfjs` import registers the gradients.
await selectBackend({ backend: "cpu", log: () => {} });
const { result, store } = await tinyRun({
  dir,
  steps: 5,
  hangFromStep: 3,
  handleSignals: true,
  logger: silentLogger,
  onHang: () => console.log("HANG"),
});
const statuses = await stepStatuses(store, 3);
console.log(
  `RESULT ${JSON.stringify({ aborted: result.aborted, steps: result.stepsCompleted, checkpoint: result.checkpointDir, statuses })}`,
);
