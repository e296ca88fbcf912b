import type { HfTokenizer } from "./hf-tokenizer.js";

/**
 * How many UTF-8 bytes of the (normalized) input each token covers, so token positions can be matched to
 * character spans of a rendered chat. Byte-level BPE vocabularies spell every byte as one printable
 * character (the GPT-2 table: printable Latin-1 bytes map to themselves, the other 68 bytes to U+0100 and
 * up, in byte order); an added token covers its literal content. Other vocabularies fall back to the UTF-8
 * length of the token's decoded text.
 */

let byteOfChar: Map<number, number> | null = null;

function byteLevelTable(): Map<number, number> {
  if (byteOfChar) return byteOfChar;
  const table = new Map<number, number>();
  const printable = (b: number) => (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
  let next = 256;
  for (let b = 0; b < 256; b++) table.set(printable(b) ? b : next++, b);
  byteOfChar = table;
  return table;
}

export function tokenByteLengths(tokenizer: HfTokenizer, ids: readonly number[]): number[] {
  const table = tokenizer.byteLevel ? byteLevelTable() : null;
  return ids.map((id) => {
    const added = tokenizer.addedToken(id);
    if (added) return Buffer.byteLength(added.content, "utf8");
    const raw = tokenizer.idToTokenString(id);
    if (table && raw !== undefined) {
      let n = 0;
      for (const ch of raw) n += table.has(ch.codePointAt(0) as number) ? 1 : Buffer.byteLength(ch, "utf8");
      return n;
    }
    return Buffer.byteLength(tokenizer.decode([id]), "utf8");
  });
}
