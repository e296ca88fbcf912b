#!/usr/bin/env node
/**
 * agl-apo: read an APO run back from its store.
 *
 *   agl-apo history --db sqlite:./agl.db            versions, parents, scores, diffs against the parent
 *   agl-apo history --db postgres://... --json       the same as JSON
 *   agl-apo best --db sqlite:./agl.db                the best prompt template, as plain text
 */
import { exitWithError, installLogging, logFlagOptions, packageVersion } from "@agl/core";
import { openStore } from "@agl/store";
import { Command, Option } from "commander";
import pino from "pino";
import pretty from "pino-pretty";
import { bestOf, formatPromptHistory, loadPromptHistory } from "./history.js";

const program = new Command()
  .name("agl-apo")
  .description("Inspect APO prompt-optimisation runs in a store")
  .version(packageVersion(import.meta.url), "-V, --version");
for (const option of logFlagOptions(Option)) program.addOption(option);
// Logs (the store's, warnings) go to stderr through the one agl logger; results go to stdout.
program.hook("preAction", () => {
  const { logLevel, logFormat } = program.opts<{ logLevel?: string; logFormat?: string }>();
  installLogging({ pino, pretty, level: logLevel, format: logFormat, name: "agl-apo" });
});

const common = (command: Command) =>
  command
    .requiredOption("--db <uri>", "the run's store: sqlite:<path> | <path> | postgres://...")
    .option("--run-id <id>", "the APO runId", "apo");

common(program.command("history").description("every prompt version with its parent, scores and diff"))
  .option("--no-diff", "print each template in full instead of a diff against its parent")
  .option("--critique", "also print the critique that led to each version")
  .option("--json", "print the history as JSON")
  .action(async (opts) => {
    await withHistory(opts, (history) => {
      if (opts.json) return JSON.stringify(history, null, 2);
      return formatPromptHistory(history, { diff: opts.diff, critique: Boolean(opts.critique) });
    });
  });

common(program.command("best").description("print the best prompt template of the run")).action(
  async (opts) => {
    await withHistory(opts, (history) => {
      const best = bestOf(history);
      return best ? best.template.template : "";
    });
  },
);

async function withHistory(
  opts: { db: string; runId: string },
  render: (history: NonNullable<Awaited<ReturnType<typeof loadPromptHistory>>>) => string,
): Promise<void> {
  // A reader: a mistyped path must fail, not leave an empty database behind.
  const store = await openStore(opts.db, { mustExist: true });
  try {
    const history = await loadPromptHistory(store, { runId: opts.runId });
    if (!history) {
      process.stderr.write(`agl-apo: no APO run "${opts.runId}" in ${opts.db}\n`);
      process.exitCode = 1;
      return;
    }
    process.stdout.write(`${render(history)}\n`);
  } finally {
    await store.close();
  }
}

program.parseAsync().catch((error: unknown) => exitWithError("agl-apo", error));
