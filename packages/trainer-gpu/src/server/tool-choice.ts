import { InvalidArgumentError } from "@agl/core";
import type { ChatMessage, ToolCall, ToolDefinition } from "../tokenizer/messages.js";
import type { ChatEncoder } from "../tokenizer/text-tokenizer.js";
import { TOOL_CALL_CLOSE, TOOL_CALL_OPEN } from "../tokenizer/tool-calls.js";
import type { ChatCompletionRequest } from "./schemas.js";
import { HttpError } from "./schemas.js";

/**
 * `tool_choice` as vLLM enforces it. "auto" (the default with tools): the model decides and the reply is
 * parsed for tool calls. "none": tools are still rendered into the prompt, the reply is returned as content
 * and never parsed. "required" and a named function (`{"type":"function","function":{"name":...}}`): the
 * reply is tool call(s). vLLM guarantees that with guided decoding; here the opening of the call is forced
 * (the chat template's own rendering of a call, from the start of the reply through `"arguments":`, one
 * prefix per allowed tool, so the model picks among the tool names) and the model writes the arguments.
 */

/** One forced opening: the tool it names and the ids of the call up to where the arguments begin. */
export interface ForcedToolCall {
  name: string;
  ids: number[];
}

type ToolChoice = ChatCompletionRequest["tool_choice"];

/** The allowed tool names, or null when the reply is not forced ("auto", "none", absent). */
export function forcedToolNames(
  choice: ToolChoice,
  tools: readonly ToolDefinition[] | null,
): string[] | null {
  if (choice == null || choice === "auto" || choice === "none") return null;
  const names = (tools ?? []).map((t) => t.function.name);
  if (names.length === 0) {
    throw new HttpError(
      400,
      "When using `tool_choice`, `tools` must be set.",
      "tool_choice",
      "invalid_value",
    );
  }
  if (choice === "required") return names;
  if (!names.includes(choice.function.name)) {
    throw new HttpError(
      400,
      `The tool "${choice.function.name}" named in tool_choice is not one of the request's tools (${names.join(", ")})`,
      "tool_choice.function.name",
      "invalid_value",
    );
  }
  return [choice.function.name];
}

/**
 * The forced opening of a call to each tool in `names`: the chat rendered with an assistant turn calling
 * the tool with empty arguments, minus the prompt, cut before the arguments and at a token boundary of that
 * rendering (so the model continues with the very tokens it was trained on, e.g. ` {"` after `"arguments":`).
 */
export function forcedToolCalls(
  template: ChatEncoder,
  messages: readonly ChatMessage[],
  tools: readonly ToolDefinition[],
  promptIds: readonly number[],
  names: readonly string[],
): ForcedToolCall[] {
  const tok = template.tokenizer;
  const text = (ids: readonly number[]) => tok.decode(ids, { skipSpecialTokens: false });
  return names.map((name) => {
    const call: ToolCall = { id: "call_0", type: "function", function: { name, arguments: "{}" } };
    const turn: ChatMessage = { role: "assistant", content: null, tool_calls: [call] };
    // The call as it renders when its result follows (as it always does in a conversation, and in every
    // transcript a model is trained on): some templates render the LAST assistant turn differently, e.g.
    // Qwen3 puts an empty `<think>` block only before the final turn, so a call rendered last would force
    // tokens the model never wrote before a call. Templates that cannot render the result fall back to
    // the call rendered last.
    const renderings = [
      [...messages, turn, { role: "tool", tool_call_id: call.id, content: "" } as ChatMessage],
      [...messages, turn],
    ];
    let ids: number[] = [];
    for (const [k, conversation] of renderings.entries()) {
      try {
        ids = template.encodeChat(conversation, tools, { addGenerationPrompt: false }).ids;
      } catch (error) {
        if (!InvalidArgumentError.isInstance(error)) throw error;
        if (k === renderings.length - 1) throw unsupported(`${error.message}`);
        continue;
      }
      if (ids.length > promptIds.length && promptIds.every((id, i) => ids[i] === id)) break;
    }
    if (ids.length <= promptIds.length || promptIds.some((id, i) => ids[i] !== id)) {
      throw unsupported(
        "the chat template does not render an assistant tool call after the generation prompt",
      );
    }
    const reply = ids.slice(promptIds.length);
    const whole = text(reply);
    const open = whole.indexOf(TOOL_CALL_OPEN);
    const quoted = JSON.stringify(name);
    const at = open < 0 ? -1 : whole.indexOf(quoted, open + TOOL_CALL_OPEN.length);
    const args = at < 0 ? -1 : whole.indexOf("{}", at + quoted.length);
    if (args < 0)
      throw unsupported(`the chat template does not render tool calls as ${TOOL_CALL_OPEN} blocks`);
    let n = 0;
    while (n < reply.length && text(reply.slice(0, n + 1)).length <= args) n++;
    const forced = reply.slice(0, n);
    if (!text(forced).includes(TOOL_CALL_OPEN)) {
      throw unsupported(`the call's opening is not a token prefix of the rendered call`);
    }
    return { name, ids: forced };
  });
}

function unsupported(why: string): HttpError {
  return new HttpError(400, `tool_choice cannot be enforced: ${why}`, "tool_choice", "invalid_value");
}

/**
 * A forced reply that did not parse as tool calls (its arguments are not JSON, or it was cut off): still a
 * call to the tool whose opening it was forced into, with the model's argument text as written (vLLM, for
 * a named function, returns the generated text as `arguments`); empty arguments when `max_tokens` cut the
 * opening after the tool was decided. Null when the output never got as far as deciding the tool.
 */
export function forcedFallbackCall(
  forced: readonly ForcedToolCall[],
  tokenIds: readonly number[],
  decode: (ids: readonly number[]) => string,
  makeId: () => string,
): { content: string | null; call: ToolCall } | null {
  const onPath = forced.filter((f) => f.ids.every((id, i) => i >= tokenIds.length || tokenIds[i] === id));
  const hit = onPath.length === 1 ? onPath[0] : undefined;
  if (!hit) return null;
  const opening = decode(hit.ids);
  const open = opening.indexOf(TOOL_CALL_OPEN);
  let args = tokenIds.length > hit.ids.length ? decode(tokenIds.slice(hit.ids.length)) : "";
  const close = args.indexOf(TOOL_CALL_CLOSE);
  if (close >= 0) args = args.slice(0, close).trimEnd().replace(/\}$/, "");
  const content = open > 0 ? opening.slice(0, open) : null;
  return {
    content,
    call: { id: makeId(), type: "function", function: { name: hit.name, arguments: args.trim() } },
  };
}
