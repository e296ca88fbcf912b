/**
 * A character-level tokenizer with a small fixed vocabulary: special tokens first, then one token per
 * character of `chars` (default: printable ASCII plus newline and tab). Characters outside the
 * vocabulary map to `<unk>`. Tiny policies learn far faster over ~100 symbols than over a BPE vocab, and
 * one token per character makes tokenization trivially incremental and unambiguous (no BPE split drift).
 */

import type { TextTokenizer } from "./text-tokenizer.js";

export const SPECIAL_TOKENS = [
  "<pad>",
  "<bos>",
  "<eos>",
  "<unk>",
  "<|system|>",
  "<|user|>",
  "<|assistant|>",
  "<|tool|>",
  "<|tools|>",
  "<tool_call>",
  "</tool_call>",
] as const;
export type SpecialToken = (typeof SPECIAL_TOKENS)[number];

/** Specials that are part of the visible text (a tool call in raw output) rather than control markers. */
const TEXT_SPECIALS = new Set<string>(["<tool_call>", "</tool_call>"]);

export const DEFAULT_CHARS = `\n\t${Array.from({ length: 95 }, (_, i) => String.fromCharCode(32 + i)).join("")}`;

export interface TokenizerConfig {
  kind: "char";
  chars: string;
}

export interface DecodeOptions {
  /** Drop control specials (`<pad>`, `<bos>`, `<eos>`, role markers); tool-call markers are kept. */
  skipSpecialTokens?: boolean;
}

export class Tokenizer implements TextTokenizer {
  readonly chars: string;
  readonly vocabSize: number;
  private readonly charToId = new Map<string, number>();
  private readonly idToText: string[];
  private readonly specialIds = new Map<string, number>();

  constructor(config: Partial<TokenizerConfig> = {}) {
    const chars = config.chars ?? DEFAULT_CHARS;
    const unique = Array.from(new Set(Array.from(chars)));
    if (unique.length !== Array.from(chars).length) throw new Error("Tokenizer chars must not repeat");
    this.chars = unique.join("");
    this.idToText = [...SPECIAL_TOKENS, ...unique];
    for (const [i, t] of SPECIAL_TOKENS.entries()) this.specialIds.set(t, i);
    for (const [i, c] of unique.entries()) this.charToId.set(c, SPECIAL_TOKENS.length + i);
    this.vocabSize = this.idToText.length;
  }

  static fromConfig(config: TokenizerConfig): Tokenizer {
    if (config.kind !== "char") throw new Error(`Unsupported tokenizer kind "${String(config.kind)}"`);
    return new Tokenizer(config);
  }

  toConfig(): TokenizerConfig {
    return { kind: "char", chars: this.chars };
  }

  get padId(): number {
    return 0;
  }
  get bosId(): number {
    return 1;
  }
  get eosId(): number {
    return 2;
  }
  get eosIds(): readonly number[] {
    return [this.eosId];
  }
  get unkId(): number {
    return 3;
  }

  special(token: SpecialToken): number {
    return this.specialIds.get(token) as number;
  }

  isSpecial(id: number): boolean {
    return id >= 0 && id < SPECIAL_TOKENS.length;
  }

  /** Plain text to ids; special-token strings inside text are NOT interpreted (prompt injection safe). */
  encode(text: string): number[] {
    const out: number[] = [];
    for (const ch of text) out.push(this.charToId.get(ch) ?? this.unkId);
    return out;
  }

  /** The text of one token (specials as their literal name). */
  tokenText(id: number): string {
    return this.idToText[id] ?? "<unk>";
  }

  decode(ids: readonly number[], options: DecodeOptions = {}): string {
    let out = "";
    for (const id of ids) {
      const t = this.tokenText(id);
      if (options.skipSpecialTokens && this.isSpecial(id) && !TEXT_SPECIALS.has(t)) continue;
      out += t;
    }
    return out;
  }
}
