import { afterEach } from "vitest";
import { type Child, spawnTs } from "../store-http/processes.js";

/** A spawner for one CLI whose children are killed after each test, so a failing test leaves none behind. */
export function cliSpawner(script: string): (args: string[]) => Child {
  const children: Child[] = [];
  afterEach(() => {
    for (const c of children.splice(0)) c.proc.kill("SIGKILL");
  });
  return (args) => {
    const child = spawnTs(script, args);
    children.push(child);
    return child;
  };
}
