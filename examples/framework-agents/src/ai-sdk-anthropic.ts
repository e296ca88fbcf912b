import { createAnthropic } from "@ai-sdk/anthropic";
import { runAiSdkAgent } from "./ai-sdk-agent.js";

/** The AI SDK's Anthropic provider (`/v1/messages`). The one change: `baseURL` (ending in `/v1`). */
export function runAiSdkAnthropic(baseURL: string, apiKey = "unused"): Promise<string[]> {
  const anthropic = createAnthropic({ baseURL, apiKey });
  return runAiSdkAgent(anthropic("policy"));
}
