import type { ChatMessage, ToolDefinition } from "./messages.js";
import type { ParsedAssistantOutput } from "./tool-calls.js";

/**
 * What the generator, PolicyServer, sft() and PPO need from a tokenizer. Two implementations: the
 * character-level `Tokenizer` (tiny from-scratch policies) and `HfTokenizer` (a checkpoint's tokenizer.json).
 */
export interface TextTokenizer {
  readonly vocabSize: number;
  /** Fills padding in training batches (never attended to). */
  readonly padId: number;
  /** Generation stops after any of these (the checkpoint's eos ids; the char tokenizer's `<eos>`). */
  readonly eosIds: readonly number[];
  /**
   * Text to ids. `addSpecialTokens` (an `HfTokenizer` defaults it to true, as transformers' `encode`) runs
   * the checkpoint's post-processor (e.g. Llama-3's bos); the character tokenizer has none and never adds.
   */
  encode(text: string, options?: EncodeOptions): number[];
  decode(ids: readonly number[], options?: { skipSpecialTokens?: boolean }): string;
  /** The text of one token as reported in logprobs. */
  tokenText(id: number): string;
}

export interface EncodeOptions {
  /** Add the tokenizer's own special tokens around the text (its post-processor). */
  addSpecialTokens?: boolean;
}

export interface EncodedChat {
  ids: number[];
  /** 1 where the token was produced by the assistant (its text, tool calls and closing eos), else 0. */
  assistantMask: number[];
  /**
   * Index in `ids` where each message's segment starts; -1 where a checkpoint template renders the chat
   * up to that message differently from how it appears inside the longer chat (no defined boundary).
   */
  messageOffsets: number[];
}

export interface EncodeChatOptions {
  /** Append the assistant header so the model continues as the assistant (default true). */
  addGenerationPrompt?: boolean;
}

/** What turns a chat into prompt ids and parses tool calls back out of generated text. */
export interface ChatEncoder {
  readonly tokenizer: TextTokenizer;
  /** Validate messages/tools (InvalidArgumentError naming the field) and render to ids with the assistant mask. */
  encodeChat(
    messages: readonly ChatMessage[],
    tools?: readonly ToolDefinition[] | null,
    options?: EncodeChatOptions,
  ): EncodedChat;
  /** Split generated text into content and OpenAI tool calls; never throws. */
  parseToolCalls(text: string): ParsedAssistantOutput;
}

/**
 * Turns generated ids into text one token at a time. A byte-level token can end inside a multi-byte
 * UTF-8 character; its text is held back until the character is complete (decoding a window of recent
 * tokens, as vLLM's incremental detokenizer does), so streamed text never contains a broken character.
 */
export class IncrementalDecoder {
  private readonly ids: number[] = [];
  private prefixOffset = 0;
  private readOffset = 0;

  constructor(
    private readonly tokenizer: TextTokenizer,
    private readonly skipSpecialTokens = true,
  ) {}

  /** Add one token; returns the text that became final (may be empty). */
  push(id: number): string {
    this.ids.push(id);
    const opts = { skipSpecialTokens: this.skipSpecialTokens };
    const before = this.tokenizer.decode(this.ids.slice(this.prefixOffset, this.readOffset), opts);
    const after = this.tokenizer.decode(this.ids.slice(this.prefixOffset), opts);
    if (after.length <= before.length || after.endsWith("\uFFFD")) return "";
    this.prefixOffset = this.readOffset;
    this.readOffset = this.ids.length;
    return after.slice(before.length);
  }

  /** Text still held back (an incomplete character at the very end), released as is. */
  flush(): string {
    const opts = { skipSpecialTokens: this.skipSpecialTokens };
    const before = this.tokenizer.decode(this.ids.slice(this.prefixOffset, this.readOffset), opts);
    const after = this.tokenizer.decode(this.ids.slice(this.prefixOffset), opts);
    this.prefixOffset = this.readOffset = this.ids.length;
    return after.length > before.length ? after.slice(before.length) : "";
  }
}
