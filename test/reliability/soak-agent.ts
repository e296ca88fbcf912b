// Agent of the soak's worker processes: one message span and a reward span per rollout, so a
// succeeded attempt without both of them is exactly the corruption the soak looks for.
import { emitMessage } from "@agl/core";

export default async function soakAgent(task: { i: number; sleepMs?: number }): Promise<number> {
  emitMessage(`soak rollout ${task.i}`);
  await new Promise((resolve) => setTimeout(resolve, task.sleepMs ?? 20));
  return 1;
}
