/**
 * The instructions APO sends to its optimiser models. Several wordings of the critique ("textual
 * gradient") and of the edit exist; one is picked at random per call, so candidates of one parent differ
 * in kind as well as by sampling temperature.
 */
import type { MessagesExample } from "@agl/adapter";

/** One rollout of a prompt, as the critique model sees it. */
export interface Experiment {
  status: string;
  /** The rollout's final reward; null when it emitted none. */
  reward: number | null;
  /** The LLM calls of the rollout (TraceToMessages), oldest first. */
  conversations: MessagesExample[];
}

export interface ChatTurn {
  role: "system" | "user";
  content: string;
}

export interface GradientInput {
  template: string;
  experiments: readonly Experiment[];
  /** Longest rendering of one experiment's conversation, characters. */
  maxExperimentChars: number;
}

export interface EditInput {
  template: string;
  critique: string;
  /** The placeholders the new template must keep. */
  variables: readonly string[];
}

/** A wording of the critique request. */
export interface GradientInstruction {
  name: string;
  messages(input: GradientInput): ChatTurn[];
}

/** A wording of the edit request. */
export interface EditInstruction {
  name: string;
  messages(input: EditInput): ChatTurn[];
}

/**
 * The conversations of one experiment as plain text: `[role] content` lines, tool calls spelled out. A call
 * whose messages the next call repeats (a growing chat) is shown only through that next call.
 */
export function renderConversation(conversations: readonly MessagesExample[], maxChars: number): string {
  if (conversations.length === 0) return "(no LLM call was recorded)";
  const shown = conversations.filter((call, i) => {
    const next = conversations[i + 1];
    return !next || !isPrefix(call.messages, next.messages);
  });
  const text = shown
    .map((call, i) => {
      const lines = call.messages.map((m) => {
        const content =
          typeof m.content === "string" ? m.content : m.content == null ? "" : JSON.stringify(m.content);
        const calls = (m.tool_calls ?? []).map((c) => `\n  -> ${c.function.name}(${c.function.arguments})`);
        return `[${m.role}] ${content}${calls.join("")}`;
      });
      return (shown.length > 1 ? `--- LLM call ${i + 1} of ${shown.length}\n` : "") + lines.join("\n");
    })
    .join("\n");
  if (text.length <= maxChars) return text;
  const keep = Math.max(0, maxChars - 40);
  return `${text.slice(0, Math.ceil(keep / 2))}\n[... ${text.length - keep} characters cut ...]\n${text.slice(text.length - Math.floor(keep / 2))}`;
}

function isPrefix(
  a: readonly MessagesExample["messages"][number][],
  b: readonly MessagesExample["messages"][number][],
): boolean {
  return a.length <= b.length && a.every((m, i) => JSON.stringify(m) === JSON.stringify(b[i]));
}

function outcome(e: Experiment): string {
  return `status ${e.status}, reward ${e.reward === null ? "none" : e.reward}`;
}

function experimentsBlock(input: GradientInput, order: "as-is" | "worst-first"): string {
  const list = [...input.experiments];
  if (order === "worst-first") list.sort((a, b) => (a.reward ?? 0) - (b.reward ?? 0));
  return list
    .map(
      (e, i) =>
        `### Run ${i + 1} (${outcome(e)})\n${renderConversation(e.conversations, input.maxExperimentChars)}`,
    )
    .join("\n\n");
}

const fence = (text: string) => `<template>\n${text}\n</template>`;

/** Diagnose the low-reward runs and propose concrete fixes. */
const failureAnalysis: GradientInstruction = {
  name: "failure-analysis",
  messages: (input) => [
    {
      role: "system",
      content:
        "You review prompt templates for an AI agent. Rewards are between 0 and 1; higher is better. " +
        "Find out why the template below led to low rewards and say what to change.",
    },
    {
      role: "user",
      content: [
        "## Prompt template",
        fence(input.template),
        "## Runs with this template (lowest reward first)",
        experimentsBlock(input, "worst-first"),
        "## What to write",
        "For each distinct cause of a lost reward, one bullet: the symptom seen in the runs, its likely cause " +
          "in the template, and a concrete change (a rule, a format requirement, an ordering, a definition). " +
          "Only changes whose effect could be checked on a new run. No more than 6 bullets.",
      ].join("\n\n"),
    },
  ],
};

/** Contrast what rewarded runs did with what unrewarded ones did. */
const contrastRuns: GradientInstruction = {
  name: "contrast-runs",
  messages: (input) => [
    {
      role: "system",
      content:
        "You are a careful prompt engineer. You compare runs of an agent to learn which instructions it was missing.",
    },
    {
      role: "user",
      content: [
        "The agent received this prompt template (placeholders in braces are filled per task):",
        fence(input.template),
        "Here are sample runs, each with its outcome:",
        experimentsBlock(input, "as-is"),
        "Compare the runs that earned reward with those that did not. What did the successful replies do that " +
          "the others did not, and which instruction would have made every run behave like the best one? " +
          "Answer with 3 to 5 short bullets under the heading 'Critique:'.",
      ].join("\n\n"),
    },
  ],
};

/** Audit the template against a checklist, grounded in the runs. */
const checklistReview: GradientInstruction = {
  name: "checklist-review",
  messages: (input) => [
    {
      role: "system",
      content: [
        "You audit prompt templates. Check, in this order, and report only what fails:",
        "1. Goal: is the expected result stated in one clear sentence?",
        "2. Output: are the exact format, length and what must NOT be included spelled out?",
        "3. Method: are the steps or rules the task needs given, with precedence between them?",
        "4. Edge cases: what should happen with unusual or missing input?",
        "5. Conflicts: do any two instructions contradict each other?",
        "Ground every finding in the sample runs. Stay under 250 words.",
      ].join("\n"),
    },
    {
      role: "user",
      content: [
        "## Template",
        fence(input.template),
        "## Sample runs",
        experimentsBlock(input, "worst-first"),
      ].join("\n\n"),
    },
  ],
};

function variablesRule(variables: readonly string[]): string {
  if (variables.length === 0) return "The template has no placeholders; do not add any.";
  const list = variables.map((v) => `{${v}}`).join(", ");
  return `Keep every placeholder exactly as written (${list}) and add no new ones; write a literal brace as {{ or }}.`;
}

/** Rewrite the template to address the whole critique. */
const fullRevision: EditInstruction = {
  name: "full-revision",
  messages: (input) => [
    {
      role: "system",
      content: [
        "You revise prompt templates. Apply the critique to the template:",
        "- restructure or rewrite wherever the critique calls for it;",
        "- state any output format, structure or length it asks for explicitly;",
        "- say what to do before how to do it;",
        `- ${variablesRule(input.variables)}`,
        "Reply with the complete new template between <prompt> and </prompt> and nothing else.",
      ].join("\n"),
    },
    {
      role: "user",
      content: `Template:\n${fence(input.template)}\n\nCritique:\n${input.critique}`,
    },
  ],
};

/** Change one thing: the most important point of the critique. */
const singleFix: EditInstruction = {
  name: "single-fix",
  messages: (input) => [
    {
      role: "system",
      content: [
        "You make small, safe improvements to prompt templates.",
        "Pick the ONE point of the critique that would raise the reward most and change the template to fix " +
          "it. Leave everything else as it is: same tone, similar length, same structure.",
        variablesRule(input.variables),
        "Reply with the complete revised template between <prompt> and </prompt>, with no explanation.",
      ].join("\n"),
    },
    {
      role: "user",
      content: `TEMPLATE\n${fence(input.template)}\n\nCRITIQUE\n${input.critique}`,
    },
  ],
};

export const DEFAULT_GRADIENT_INSTRUCTIONS: readonly GradientInstruction[] = [
  failureAnalysis,
  contrastRuns,
  checklistReview,
];

export const DEFAULT_EDIT_INSTRUCTIONS: readonly EditInstruction[] = [fullRevision, singleFix];
