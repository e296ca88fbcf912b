import { SeededRandom } from "@agl/trainer-gpu";
import type {
  ChatCompletionFunctionTool,
  ChatCompletionMessageParam,
} from "openai/resources/chat/completions";
import { freeTextChat } from "./base-corpus-free-text.js";
import type { Demo } from "./dataset.js";

/**
 * The generic pretraining corpus of the job's base model (`base/`, made by src/pretrain-base.ts): what a
 * downloaded chat model brings to fine-tuning and a model trained from nothing lacks, above all copying a
 * multi-token string (a number is one token per digit in Qwen's pre-tokenizer) from the context into the
 * reply. Short chats in the checkpoint's own template that call generic tools with values copied from the
 * user turn (with and without the tools block of several tools in the prompt), report what a tool returned,
 * and repeat lists of numbers and words. Nothing of the task: no calculator, no arithmetic, no operator
 * between numbers, no word problems; numbers of 1-4 digits. Deterministic for a seed.
 */

const fn = (name: string, description: string, properties: Record<string, { type: string }>) =>
  ({
    type: "function",
    function: {
      name,
      description,
      parameters: { type: "object", properties, required: Object.keys(properties) },
    },
  }) satisfies ChatCompletionFunctionTool;

/** The corpus's tools (the task's calculator is not among them). */
export const BASE_TOOLS: ChatCompletionFunctionTool[] = [
  fn("lookup_order", "Find an order by its number.", { id: { type: "string" } }),
  fn("get_weather", "Weather forecast for a city.", { city: { type: "string" }, days: { type: "integer" } }),
  fn("convert", "Convert a value to a unit.", { value: { type: "string" }, unit: { type: "string" } }),
  fn("repeat", "Say a text back.", { text: { type: "string" } }),
  fn("find_room", "Where a room is.", { number: { type: "integer" } }),
  fn("track_parcel", "Status of a parcel by its code.", { code: { type: "string" } }),
];

const CITIES = ["Paris", "Oslo", "Lima", "Rome", "Cairo", "Tokyo", "Berlin", "Madrid"];
const UNITS = ["km", "miles", "grams", "pounds", "liters", "meters"];
const WORDS = ["red", "blue", "green", "apple", "river", "stone", "cloud", "tiger", "piano", "lemon"];
const PEOPLE = ["Ada", "Lea", "Ivo", "Noa", "Raj", "Zoe", "Eli", "Mia"];
const STATES = ["shipped", "delayed", "ready", "open", "closed"];

/** A whole number of 1-4 digits, each length equally likely. */
export function baseNumber(rng: SeededRandom): number {
  const digits = 1 + rng.int(4);
  const lo = digits === 1 ? 0 : 10 ** (digits - 1);
  return lo + rng.int(10 ** digits - lo);
}

const pick = <T>(rng: SeededRandom, xs: readonly T[]): T => xs[rng.int(xs.length)]!;

/** The call a user turn asks for, and the user turn. */
function request(rng: SeededRandom): { ask: string; name: string; args: Record<string, unknown> } {
  const who = pick(rng, PEOPLE);
  const n = baseNumber(rng);
  switch (rng.int(6)) {
    case 0:
      return { ask: `${who} asks about order ${n}.`, name: "lookup_order", args: { id: String(n) } };
    case 1: {
      const city = pick(rng, CITIES);
      const days = 1 + rng.int(9);
      return {
        ask: `Weather in ${city} for ${days} days, please.`,
        name: "get_weather",
        args: { city, days },
      };
    }
    case 2: {
      const unit = pick(rng, UNITS);
      return { ask: `Convert ${n} to ${unit}.`, name: "convert", args: { value: String(n), unit } };
    }
    case 3: {
      const text = Array.from({ length: 1 + rng.int(3) }, () =>
        rng.next() < 0.5 ? pick(rng, WORDS) : String(baseNumber(rng)),
      ).join(" ");
      return { ask: `Use the tool to say ${text}`, name: "repeat", args: { text } };
    }
    case 4:
      return { ask: `Where is room ${n}? ${who} is lost.`, name: "find_room", args: { number: n } };
    default: {
      const code = `${pick(rng, WORDS)}${n}`;
      return { ask: `Track parcel ${code} for ${who}.`, name: "track_parcel", args: { code } };
    }
  }
}

function toolChat(rng: SeededRandom, i: number): ChatCompletionMessageParam[] {
  const { ask, name, args } = request(rng);
  const id = `call_${i}`;
  const result = rng.next() < 0.5 ? String(baseNumber(rng)) : `${pick(rng, STATES)} ${baseNumber(rng)}`;
  const messages: ChatCompletionMessageParam[] = [
    { role: "user", content: ask },
    {
      role: "assistant",
      content: null,
      tool_calls: [{ id, type: "function", function: { name, arguments: JSON.stringify(args) } }],
    },
    { role: "tool", tool_call_id: id, content: result },
  ];
  // Reporting the result copies it from the tool message; some replies carry the value asked about too.
  const first = Object.values(args)[0];
  messages.push({
    role: "assistant",
    content: rng.next() < 0.5 ? `The result is ${result}.` : `${String(first)}: ${result}`,
  });
  return messages;
}

function repeatChat(rng: SeededRandom): ChatCompletionMessageParam[] {
  const items = Array.from({ length: 2 + rng.int(5) }, () =>
    rng.next() < 0.8 ? String(baseNumber(rng)) : pick(rng, WORDS),
  );
  const list = items.join(", ");
  switch (rng.int(3)) {
    case 0:
      return [
        { role: "user", content: `Repeat after me: ${list}` },
        { role: "assistant", content: list },
      ];
    case 1:
      return [
        { role: "user", content: `Items ${list}. Which is last?` },
        { role: "assistant", content: `The last is ${items.at(-1)}, the first ${items[0]}.` },
      ];
    default:
      return [
        { role: "user", content: `Write these on one line each: ${list}` },
        { role: "assistant", content: items.join("\n") },
      ];
  }
}

/**
 * `n` chats of the corpus: 60% tool chats (half with a tools block of three corpus tools, the called ones
 * among them, in a shuffled order; the rest without, the short rows where copying forms fastest), 40%
 * repeat chats. `freeText`: the share of chats replaced by free-text chats of two calls
 * (src/base-corpus-free-text.ts; with and without a tools block as the others).
 */
export function baseCorpus(n: number, seed: number, options: { freeText?: number } = {}): Demo[] {
  const freeText = options.freeText ?? 0;
  const rng = new SeededRandom(seed);
  return Array.from({ length: n }, (_, i) => {
    // Drawn only when asked for, so the corpus without free text (which the base's tokenizer is trimmed
    // over) stays the same chats for a seed.
    const free = freeText > 0 && rng.next() < freeText;
    if (!free && rng.next() >= 0.6) return { messages: repeatChat(rng), tools: [] };
    const withTools = rng.next() < 0.5;
    const messages = free ? freeTextChat(rng, i) : toolChat(rng, i);
    if (!withTools) return { messages, tools: [] };
    const called = new Set(
      messages.flatMap((m) =>
        "tool_calls" in m && m.tool_calls
          ? m.tool_calls.map((c) => (c as { function: { name: string } }).function.name)
          : [],
      ),
    );
    const others = rng
      .shuffle(BASE_TOOLS.filter((t) => !called.has(t.function.name)))
      .slice(0, 3 - called.size);
    const tools = rng.shuffle([...BASE_TOOLS.filter((t) => called.has(t.function.name)), ...others]);
    return { messages, tools };
  });
}
