/**
 * One APO run of the apo-agent: the agent's system prompt is optimised on arithmetic tasks, with the
 * store in a SQLite file so the run can be resumed and inspected with `agl-apo history`.
 */
import { APO, type ApoResult, formatPromptHistory, loadPromptHistory } from "@agl/apo";
import { mockArithmeticTasks, mockOptimizerResponder } from "@agl/apo/mock-optimizer";
import { consoleLogger, type Logger, llm, promptTemplate, Trainer } from "@agl/core";
import { startMockLLMServer } from "@agl/core/mock-llm";
import { SqliteLightningStore } from "@agl/store";
import { apoAgent, SEED_SYSTEM_PROMPT } from "./agent.js";

export interface ApoAgentOptions {
  /** The agent's OpenAI-compatible endpoint; none = the mock server (agent, critic and editor). */
  baseURL?: string;
  /**
   * Name of the environment variable holding the agent's API key: the `main_llm` resource carries this
   * reference (`api_key_env`), never the key, so the key stays out of the store.
   */
  apiKeyEnv?: string;
  model: string;
  /** The optimiser's endpoint and key (default: the agent's); the optimiser's key is never stored. */
  optimizerBaseURL?: string;
  optimizerApiKey?: string;
  gradientModel: string;
  editModel: string;
  rounds: number;
  beamWidth: number;
  branchFactor: number;
  gradientBatchSize: number;
  valBatchSize: number;
  trainSize: number;
  valSize: number;
  runners: number;
  /** SQLite file of the run's store. */
  db: string;
  runId: string;
  logger?: Logger;
}

export interface ApoAgentReport {
  result: ApoResult;
  history: string;
  mock: boolean;
}

export async function runApoAgent(options: ApoAgentOptions): Promise<ApoAgentReport> {
  const mock = options.baseURL === undefined;
  const server = mock
    ? await startMockLLMServer({
        respond: mockOptimizerResponder({
          gradientModel: options.gradientModel,
          editModel: options.editModel,
        }),
      })
    : undefined;
  const baseURL = server?.baseURL ?? options.baseURL!;
  const store = new SqliteLightningStore(options.db);
  try {
    const logger = options.logger ?? consoleLogger("info");
    const trainer = new Trainer({
      store,
      logger,
      nRunners: options.runners,
      runnerConcurrency: 4,
      pollIntervalMs: 20,
      initialResources: {
        main_llm: llm({
          endpoint: baseURL,
          model: options.model,
          ...(options.apiKeyEnv ? { api_key_env: options.apiKeyEnv } : {}),
        }),
        system_prompt: promptTemplate(SEED_SYSTEM_PROMPT),
      },
      algorithm: new APO({
        baseURL: options.optimizerBaseURL ?? baseURL,
        apiKey:
          options.optimizerApiKey ??
          (options.apiKeyEnv ? process.env[options.apiKeyEnv] : undefined) ??
          "none",
        gradientModel: options.gradientModel,
        applyEditModel: options.editModel,
        beamRounds: options.rounds,
        beamWidth: options.beamWidth,
        branchFactor: options.branchFactor,
        gradientBatchSize: options.gradientBatchSize,
        valBatchSize: options.valBatchSize,
        runId: options.runId,
        pollIntervalMs: 200,
      }),
    });
    const train = mockArithmeticTasks(options.trainSize);
    const val = mockArithmeticTasks(options.valSize, 1000);
    const { result } = await trainer.fit<unknown, ApoResult>(apoAgent, train, { valDataset: val });
    const history = await loadPromptHistory(store, { runId: options.runId });
    return { result, history: history ? formatPromptHistory(history) : "", mock };
  } finally {
    await store.close();
    await server?.close();
  }
}
