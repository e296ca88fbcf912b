import { resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { type AgentLike, InvalidArgumentError } from "@agl/core";

/**
 * Import an agent module for the worker CLI: its default export (or an export named `agent`) must
 * be a rollout() agent, a LitAgent instance, a plain rollout function, or a LitAgent subclass
 * (instantiated with no arguments).
 */
export async function loadAgent(modulePath: string): Promise<AgentLike> {
  const url = /^[a-z]+:/i.test(modulePath)
    ? modulePath
    : pathToFileURL(resolve(process.cwd(), modulePath)).href;
  const mod = (await import(url)) as Record<string, unknown>;
  let agent = mod.default ?? mod.agent;
  // A CommonJS module or a bundler's interop wrapper nests the real export one level down.
  if (agent && typeof agent === "object" && "default" in agent && Object.keys(agent).length === 1) {
    agent = (agent as { default: unknown }).default;
  }
  if (typeof agent === "function" && /^class[\s{]/.test(Function.prototype.toString.call(agent))) {
    agent = new (agent as new () => object)();
  }
  if (agent === undefined || agent === null || (typeof agent !== "function" && typeof agent !== "object")) {
    throw new InvalidArgumentError(
      "agent",
      `${modulePath} must export an agent as default (or as \`agent\`): a rollout() agent, a LitAgent, or a rollout function`,
    );
  }
  return agent as AgentLike;
}
