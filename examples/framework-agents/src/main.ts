/**
 * Runs one small agent per framework through the proxy against the vLLM-like mock and prints what the
 * proxy recorded: one span per LLM call, with the engine's exact token ids.
 * `pnpm build && pnpm --filter @agl/example-framework-agents start`
 */
import { runAiSdkAnthropic } from "./ai-sdk-anthropic.js";
import { runAiSdkResponses } from "./ai-sdk-responses.js";
import { runLangChainResponses } from "./langchain-responses.js";
import { startExample } from "./model.js";
import { runOpenAIAgents } from "./openai-agents.js";

const agents: Array<[string, (baseURL: string) => Promise<string[]>]> = [
  ["@openai/agents (Responses API)", runOpenAIAgents],
  ["ai + openai(model) (Responses API)", runAiSdkResponses],
  ["ai + @ai-sdk/anthropic (Messages API)", runAiSdkAnthropic],
  ["LangChain ChatOpenAI useResponsesApi", runLangChainResponses],
];

const ex = await startExample();
try {
  for (const [name, run] of agents) {
    const { rolloutId, base } = await ex.attempt();
    const answers = await run(`${base}/v1`);
    await ex.proxy.flush();
    const spans = (await ex.store.querySpans(rolloutId)).items;
    console.log(`${name}: ${JSON.stringify(answers)}`);
    for (const s of spans.sort((a, b) => a.sequence_id - b.sequence_id)) {
      const a = s.attributes as Record<string, any>;
      console.log(
        `  span ${s.sequence_id} ${a["agl.proxy.client_api"]}${a["agl.proxy.stream"] ? " (streamed)" : ""}: ` +
          `${a.prompt_token_ids.length} prompt ids, ${a.response_token_ids.length} response ids`,
      );
    }
  }
} finally {
  await ex.close();
}
