/**
 * apo-agent: optimise the system prompt of an openai-SDK agent with APO.
 *
 *   pnpm --filter @agl/example-apo-agent start                  # mock LLM server, no key needed
 *   pnpm --filter @agl/example-apo-agent start -- --base-url https://api.example.com/v1 \
 *       --model gpt-4.1-mini --gradient-model gpt-5-mini --edit-model gpt-4.1-mini   # any real endpoint
 */
import { mkdirSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { parseArgs } from "node:util";
import { secretToEnv } from "@agl/core";
import { runApoAgent } from "./run.js";

// `pnpm start -- --rounds 2` hands the script a literal "--" first.
const argv = process.argv.slice(2);
if (argv[0] === "--") argv.shift();
const { values: args } = parseArgs({
  args: argv,
  options: {
    "base-url": { type: "string" },
    "api-key": { type: "string" },
    model: { type: "string" },
    "optimizer-base-url": { type: "string" },
    "optimizer-api-key": { type: "string" },
    "gradient-model": { type: "string" },
    "edit-model": { type: "string" },
    rounds: { type: "string", default: "3" },
    "beam-width": { type: "string", default: "2" },
    "branch-factor": { type: "string", default: "2" },
    "gradient-batch-size": { type: "string", default: "4" },
    "val-batch-size": { type: "string", default: "8" },
    "train-size": { type: "string", default: "16" },
    "val-size": { type: "string", default: "16" },
    runners: { type: "string", default: "2" },
    db: { type: "string", default: "apo-agent-run/apo.db" },
    "run-id": { type: "string", default: "apo-agent" },
  },
});

function count(name: keyof typeof args, min: number): number {
  const value = Number(args[name]);
  if (!Number.isInteger(value) || value < min) {
    console.error(`apo-agent: --${name} must be an integer >= ${min}, got ${JSON.stringify(args[name])}`);
    process.exit(2);
  }
  return value;
}

async function main(): Promise<void> {
  const real = args["base-url"] !== undefined;
  // A key given on the command line goes into this process's environment under a generated name; the
  // store only ever sees that name (api_key_env), and the in-process runners read the key from it.
  const apiKeyEnv = args["api-key"]
    ? secretToEnv(args["api-key"], "APO_AGENT_API_KEY")
    : real && process.env.OPENAI_API_KEY
      ? "OPENAI_API_KEY"
      : undefined;
  const optimizerApiKey = args["optimizer-api-key"] ?? (apiKeyEnv ? process.env[apiKeyEnv] : undefined);
  const db = resolve(args.db!);
  mkdirSync(dirname(db), { recursive: true });
  const t0 = performance.now();
  const { result, history, mock } = await runApoAgent({
    ...(real ? { baseURL: args["base-url"] } : {}),
    ...(apiKeyEnv ? { apiKeyEnv } : {}),
    ...(args["optimizer-base-url"] ? { optimizerBaseURL: args["optimizer-base-url"] } : {}),
    ...(optimizerApiKey ? { optimizerApiKey } : {}),
    model: args.model ?? (real ? "gpt-4.1-mini" : "mock-model"),
    gradientModel: args["gradient-model"] ?? (real ? "gpt-5-mini" : "mock-critic"),
    editModel: args["edit-model"] ?? (real ? "gpt-4.1-mini" : "mock-editor"),
    rounds: count("rounds", 0),
    beamWidth: count("beam-width", 1),
    branchFactor: count("branch-factor", 1),
    gradientBatchSize: count("gradient-batch-size", 1),
    valBatchSize: count("val-batch-size", 1),
    trainSize: count("train-size", 1),
    valSize: count("val-size", 1),
    runners: count("runners", 1),
    db,
    runId: args["run-id"]!,
  });
  const score = (x: number | null) => (x === null || Number.isNaN(x) ? "-" : x.toFixed(3));
  console.log(`\n${history}\n`);
  console.log(
    `[apo-agent] ${mock ? "mock LLM server" : args["base-url"]}; store ${db} (run "${result.runId}")`,
  );
  if (result.resumedAfterRound > 0)
    console.log(`[apo-agent] resumed after round ${result.resumedAfterRound}`);
  for (const r of result.rounds) {
    console.log(
      `[apo-agent] round ${r.round}: leader ${r.leader.version} ${score(r.leader.score)}; ${r.candidates.length} new versions, ` +
        `${r.optimizerCalls} optimiser calls, ${r.rollouts} rollouts, ${(r.wallMs / 1000).toFixed(1)} s`,
    );
  }
  console.log(
    `[apo-agent] validation reward: seed ${score(result.initialScore)} -> best ${result.best.version} ${score(result.best.score)}`,
  );
  const problems = Object.entries(result.problems);
  if (problems.length > 0)
    console.log(`[apo-agent] optimiser problems: ${problems.map(([k, v]) => `${k}=${v}`).join(" ")}`);
  console.log(`[apo-agent] best prompt:\n${result.best.template.template}`);
  console.log(
    `[apo-agent] ${((performance.now() - t0) / 1000).toFixed(1)} s; history: agl-apo history --db ${db} --run-id ${result.runId}`,
  );
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
