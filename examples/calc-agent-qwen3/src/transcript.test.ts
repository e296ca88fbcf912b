import { type ChatMessage, HfChatTemplate, type ToolDefinition } from "@agl/trainer-gpu";
import { describe, expect, it } from "vitest";
import { taskTokenizer } from "./checkpoint.js";
import { chainedSolution, demonstrations, makeSplits } from "./dataset.js";
import { asHfTokenizer } from "./qwen-tokenizer.js";

/**
 * What SFT trains on is token for token what the policy sees and writes when it is served: for every
 * assistant turn of a demonstration, the training row's tokens before the turn are exactly the prompt
 * PolicyServer encodes from the agent's conversation so far (after the server parsed the previous replies
 * into `tool_calls` and the agent sent them back), the trained tokens are exactly the turn's reply plus
 * `<|im_end|>`, and nothing else is trained. Qwen3's template renders the last assistant turn (with an
 * empty `<think>` block) unlike earlier ones, so this is checked on one-call and two-call transcripts.
 */
describe("training rows against the served prompts, turn by turn", () => {
  const tok = asHfTokenizer(taskTokenizer());
  const template = new HfChatTemplate(tok);
  const problems = makeSplits({ train: 0, demo: 12, val: 0, test: 0 }, 6).demo;
  const demos = [...problems.map(chainedSolution), ...demonstrations(problems, 0, 6)];

  it("each turn's prompt is the row's prefix, its reply the trained span, and only replies are trained", () => {
    const imEnd = tok.encode("<|im_end|>", { addSpecialTokens: false })[0]!;
    let turns = 0;
    for (const demo of demos) {
      const tools = demo.tools as ToolDefinition[];
      const messages = demo.messages as ChatMessage[];
      const row = template.encodeChat(messages, tools, { addGenerationPrompt: false });
      // The trained spans: runs of the mask.
      const spans: Array<[number, number]> = [];
      row.assistantMask.forEach((m, t) => {
        if (m && (t === 0 || !row.assistantMask[t - 1])) spans.push([t, t + 1]);
        else if (m) spans[spans.length - 1]![1] = t + 1;
      });
      expect(spans).toHaveLength(messages.filter((m) => m.role === "assistant").length);
      // The agent's conversation as the server hands it back.
      const conversation: ChatMessage[] = [];
      let k = 0;
      for (const m of messages) {
        if (m.role !== "assistant") {
          conversation.push(m);
          continue;
        }
        const [start, end] = spans[k++]!;
        const prompt = template.encodeChat(conversation, tools).ids;
        expect(prompt).toEqual(row.ids.slice(0, start));
        const reply = row.ids.slice(start, end);
        expect(reply.at(-1)).toBe(imEnd);
        const text = tok.decode(reply.slice(0, -1), { skipSpecialTokens: true });
        // The generator's tokens decode to this text and it encodes back to them.
        expect(tok.encode(text, { addSpecialTokens: false })).toEqual(reply.slice(0, -1));
        const parsed = template.parseToolCalls(text);
        expect(parsed.toolCalls.length).toBe("tool_calls" in m && m.tool_calls ? 1 : 0);
        conversation.push(
          parsed.toolCalls.length > 0
            ? { role: "assistant", content: parsed.content, tool_calls: parsed.toolCalls }
            : { role: "assistant", content: parsed.content },
        );
        turns += 1;
      }
      // Nothing outside the replies is trained.
      const trained = row.assistantMask.reduce((a, b) => a + b, 0);
      expect(trained).toBe(spans.reduce((a, [s, e]) => a + e - s, 0));
    }
    expect(turns).toBe(12 * 3 + 12 * 2);
  });
});
