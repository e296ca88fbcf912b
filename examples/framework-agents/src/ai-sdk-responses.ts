import { createOpenAI } from "@ai-sdk/openai";
import { runAiSdkAgent } from "./ai-sdk-agent.js";

/** The AI SDK with `openai(model)`, which speaks the Responses API. The one change: `baseURL`. */
export function runAiSdkResponses(baseURL: string, apiKey = "unused"): Promise<string[]> {
  const openai = createOpenAI({ baseURL, apiKey });
  return runAiSdkAgent(openai("policy"));
}
