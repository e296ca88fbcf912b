/**
 * A character-level tokenizer with a small fixed vocabulary: special tokens first, then one token per
 * character of `chars` (default: printable ASCII plus newline and tab), then optional multi-character
 * `pieces` (whole words, numbers) matched longest-first. Characters outside the vocabulary map to `<unk>`.
 * Tiny policies learn far faster over a small vocabulary than over a BPE vocab of 100k+; pieces shorten
 * sequences and turn copying a number into copying one token (as BPE vocabularies that keep up to three
 * digits together, e.g. Llama 3's, do). Without pieces, one token per character makes tokenization
 * trivially incremental and unambiguous; with them, text re-encodes to the longest-first split, which a
 * model may not have generated (trajectory aggregation then counts a prefix mismatch).
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
  /** Multi-character tokens, each at least 2 characters of `chars`, matched longest-first. */
  pieces?: string[];
}

export interface DecodeOptions {
  /** Drop control specials (`<pad>`, `<bos>`, `<eos>`, role markers); tool-call markers are kept. */
  skipSpecialTokens?: boolean;
}

export class Tokenizer implements TextTokenizer {
  readonly chars: string;
  readonly pieces: readonly string[];
  readonly vocabSize: number;
  private readonly charToId = new Map<string, number>();
  /** Pieces by their first character, longest first, with their ids. */
  private readonly piecesByFirst = new Map<string, Array<[string, number]>>();
  private readonly idToText: string[];
  private readonly specialIds = new Map<string, number>();

  constructor(config: Partial<TokenizerConfig> = {}) {
    const chars = config.chars ?? DEFAULT_CHARS;
    const unique = Array.from(new Set(Array.from(chars)));
    if (unique.length !== Array.from(chars).length) throw new Error("Tokenizer chars must not repeat");
    this.chars = unique.join("");
    const pieces = config.pieces ?? [];
    if (new Set(pieces).size !== pieces.length) throw new Error("Tokenizer pieces must not repeat");
    for (const p of pieces) {
      if (Array.from(p).length < 2) throw new Error(`Tokenizer piece "${p}" must be at least 2 characters`);
      const missing = Array.from(p).find((ch) => !unique.includes(ch));
      if (missing !== undefined)
        throw new Error(`Tokenizer piece "${p}" uses "${missing}", which is not in chars`);
    }
    this.pieces = [...pieces];
    this.idToText = [...SPECIAL_TOKENS, ...unique, ...pieces];
    for (const [i, t] of SPECIAL_TOKENS.entries()) this.specialIds.set(t, i);
    for (const [i, c] of unique.entries()) this.charToId.set(c, SPECIAL_TOKENS.length + i);
    const firstPieceId = SPECIAL_TOKENS.length + unique.length;
    for (const [i, p] of pieces.entries()) {
      const first = String.fromCodePoint(p.codePointAt(0)!);
      const list = this.piecesByFirst.get(first) ?? [];
      list.push([p, firstPieceId + i]);
      this.piecesByFirst.set(first, list);
    }
    for (const list of this.piecesByFirst.values()) list.sort((a, b) => b[0].length - a[0].length);
    this.vocabSize = this.idToText.length;
  }

  static fromConfig(config: TokenizerConfig): Tokenizer {
    if (config.kind !== "char") throw new Error(`Unsupported tokenizer kind "${String(config.kind)}"`);
    return new Tokenizer(config);
  }

  toConfig(): TokenizerConfig {
    return this.pieces.length
      ? { kind: "char", chars: this.chars, pieces: [...this.pieces] }
      : { kind: "char", chars: this.chars };
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
    if (this.piecesByFirst.size === 0) {
      for (const ch of text) out.push(this.charToId.get(ch) ?? this.unkId);
      return out;
    }
    let i = 0;
    while (i < text.length) {
      const ch = String.fromCodePoint(text.codePointAt(i)!);
      const piece = this.piecesByFirst.get(ch)?.find(([p]) => text.startsWith(p, i));
      if (piece) {
        out.push(piece[1]);
        i += piece[0].length;
      } else {
        out.push(this.charToId.get(ch) ?? this.unkId);
        i += ch.length;
      }
    }
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
