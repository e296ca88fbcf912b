import type { SeededRandom } from "@agl/trainer-gpu";
import type { ChatCompletionMessageParam } from "openai/resources/chat/completions";

/**
 * Free-text chats of the base corpus (src/base-corpus.ts): a user turn of several lines, each stating a fact
 * with a number among words ("Ada has 37 pens and 12 cards.", "Lea is in room 58."), then two requests; the
 * assistant makes two calls in a row, each copying one value: the first from the user turn, the second
 * either another value of the user turn or the value the first tool returned. The number to copy has to be
 * found by what it is (whose cards, which room), not by where it stands, as the task's operands are found
 * inside a word problem's sentence. Still nothing of the task: no arithmetic, no calculator, no question
 * of how many.
 *
 * Lines end without a full stop, start on a new line and use only words the base's tokenizer (trimmed over the task and the short
 * corpus chats) encodes as the full Qwen3 tokenizer does, so this corpus trains a base without changing its
 * vocabulary.
 */

const PEOPLE = ["Ada", "Lea", "Ivo", "Noa", "Raj", "Zoe", "Eli", "Mia"];
const ITEMS = ["pens", "cups", "eggs", "cards", "books"];
const UNITS = ["km", "miles", "grams", "pounds", "liters", "meters"];
const CODES = ["red", "blue", "green", "apple", "river", "stone", "cloud", "tiger", "piano", "lemon"];
const STATES = ["shipped", "delayed", "ready", "open", "closed"];

const pick = <T>(rng: SeededRandom, xs: readonly T[]): T => xs[rng.int(xs.length)]!;

/** A whole number of 1-4 digits, each length equally likely. */
function number(rng: SeededRandom): number {
  const digits = 1 + rng.int(4);
  const lo = digits === 1 ? 0 : 10 ** (digits - 1);
  return lo + rng.int(10 ** digits - lo);
}

type Call = { name: string; args: Record<string, unknown> };

export function freeTextChat(rng: SeededRandom, i: number): ChatCompletionMessageParam[] {
  const [p, q] = rng.shuffle([...PEOPLE]).slice(0, 2) as [string, string];
  const [item1, item2] = rng.shuffle([...ITEMS]).slice(0, 2) as [string, string];
  const counts = [number(rng), number(rng)];
  const room = number(rng);
  const order = number(rng);
  const code = `${pick(rng, CODES)}${number(rng)}`;
  const unit = pick(rng, UNITS);
  const facts = rng.shuffle([
    `${p} has ${counts[0]} ${item1} and ${counts[1]} ${item2}.`,
    `${q} is in room ${room}.`,
    `The parcel code of ${q} is ${code}.`,
  ]);
  // The first call copies a value of the user turn, named in the request or found by what it is.
  const firsts: Array<{ ask: string; call: Call }> = [
    { ask: `${p} asks about order ${order}.`, call: { name: "lookup_order", args: { id: String(order) } } },
    { ask: `Where is the room of ${q}?`, call: { name: "find_room", args: { number: room } } },
    { ask: `Track the parcel of ${q}.`, call: { name: "track_parcel", args: { code } } },
  ];
  const first = pick(rng, firsts);
  // What the first tool returns: a number, with or without a word.
  const got = number(rng);
  const result = rng.next() < 0.5 ? String(got) : `${pick(rng, STATES)} ${got}`;
  const which = rng.int(2);
  const seconds: Array<{ ask: string; call: Call }> = [
    {
      ask: `Convert the ${[item1, item2][which]} of ${p} to ${unit}.`,
      call: { name: "convert", args: { value: String(counts[which]), unit } },
    },
    { ask: `Convert the result to ${unit}.`, call: { name: "convert", args: { value: String(got), unit } } },
    { ask: `Where is the room in the result?`, call: { name: "find_room", args: { number: got } } },
  ];
  const second = pick(rng, seconds);
  const final = number(rng);
  const messages: ChatCompletionMessageParam[] = [
    // No full stop before a line break: ".\n" is one token the base's vocabulary does not have.
    {
      role: "user",
      content: [...facts, first.ask, second.ask].map((l) => l.replace(/[.?]$/, "")).join("\n"),
    },
  ];
  [first.call, second.call].forEach((c, k) => {
    const id = `call_${i}_${k}`;
    messages.push(
      {
        role: "assistant",
        content: null,
        tool_calls: [{ id, type: "function", function: { name: c.name, arguments: JSON.stringify(c.args) } }],
      },
      { role: "tool", tool_call_id: id, content: k === 0 ? result : String(final) },
    );
  });
  messages.push({ role: "assistant", content: `The result is ${final}.` });
  return messages;
}
