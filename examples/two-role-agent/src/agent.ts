import { emitReward, type LLM, type RolloutContext, rollout } from "@agl/core";
import OpenAI from "openai";
import type { ChatCompletionMessageParam } from "openai/resources/chat/completions";
import {
  answerText,
  checkerPrompt,
  type Problem,
  parseProposal,
  rejects,
  retryPrompt,
  writerPrompt,
} from "./task.js";

/**
 * The agent: ordinary `openai` SDK code with two roles. Each role asks for its own model through its own
 * LLM resource (`writer_llm`, `checker_llm`): the trainer publishes one per policy, each naming the
 * policy's model, and the proxy routes it to that policy's adapter. The writer proposes the largest digit,
 * the checker accepts it or sends it back once; the episode is right when the answer that stands is.
 * Nothing here knows about training or adapters.
 */

/**
 * Qwen3's empty think block (4 tokens, as its template renders the answer turn), then a digit or
 * "yes"/"no" (one token each) and the end token.
 */
export const MAX_REPLY_TOKENS = 8;

export interface Roles {
  writer: LLM;
  checker: LLM;
}

export interface Episode {
  /** The writer's first proposal is the largest digit. */
  writerRight: boolean;
  /** The checker's verdict on that proposal was right (accepted the largest, rejected anything else). */
  checkerRight: boolean;
  /** The checker rejected the proposal (the writer then answered again). */
  rejected: boolean;
  /** The answer that stands is the largest digit: the episode's reward. */
  correct: boolean;
}

/** The two LLM resources of a rollout, by role. */
export function rolesOf(resources: RolloutContext["resources"]): Roles {
  const get = (name: string) => {
    const r = resources[name] as LLM | undefined;
    if (!r?.endpoint) throw new Error(`two-role agent needs an LLM resource "${name}"`);
    return r;
  };
  return { writer: get("writer_llm"), checker: get("checker_llm") };
}

async function ask(
  llm: LLM,
  messages: ChatCompletionMessageParam[],
  seed: number | undefined,
): Promise<string> {
  // A reply is a few tokens: a call that has not answered in 30 s is retried rather than left to stall
  // the step (the SDK retries timeouts; the request's seed makes the retry the same sample).
  const client = new OpenAI({
    baseURL: llm.endpoint,
    apiKey: llm.api_key ?? "none",
    maxRetries: 4,
    timeout: 30_000,
  });
  const sampling = (llm.sampling_parameters ?? {}) as { temperature?: number };
  const res = await client.chat.completions.create({
    model: llm.model,
    messages,
    temperature: sampling.temperature ?? 1,
    max_tokens: MAX_REPLY_TOKENS,
    ...(seed !== undefined ? { seed } : {}),
  });
  return res.choices[0]?.message.content ?? "";
}

/** One episode; `seed` makes its sampling reproducible (each call gets its own). */
export async function solve(problem: Problem, roles: Roles, seed?: number): Promise<Episode> {
  const at = (k: number) => (seed === undefined ? undefined : seed * 4 + k);
  const writerChat: ChatCompletionMessageParam[] = [{ role: "user", content: writerPrompt(problem) }];
  const proposal = answerText(await ask(roles.writer, writerChat, at(0)));
  const writerRight = parseProposal(proposal) === problem.answer;
  const verdict = await ask(
    roles.checker,
    [{ role: "user", content: checkerPrompt(problem, proposal) }],
    at(1),
  );
  const rejected = rejects(verdict);
  let final = proposal;
  if (rejected) {
    writerChat.push(
      { role: "assistant", content: proposal },
      { role: "user", content: retryPrompt(proposal) },
    );
    final = answerText(await ask(roles.writer, writerChat, at(2)));
  }
  return {
    writerRight,
    checkerRight: rejected !== writerRight,
    rejected,
    correct: parseProposal(final) === problem.answer,
  };
}

/**
 * The rollout: the final reward (1 when the answer that stands is right), and each role's own outcome as
 * a reward scoped to its policy, which a policy declared with `reward: "own"` trains on instead of the
 * final one: the writer answers for the answer that stands, the checker for its verdict.
 */
export const twoRoleAgent = rollout<Problem>(
  async (task, { resources, rollout: r }) => {
    const seed = (r.metadata as { seed?: number } | null)?.seed;
    const e = await solve(task, rolesOf(resources), seed);
    emitReward(e.correct ? 1 : 0, { policy: "writer" });
    emitReward(e.checkerRight ? 1 : 0, { policy: "checker" });
    return e.correct ? 1 : 0;
  },
  { name: "two-role-agent" },
);
