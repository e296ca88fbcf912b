/**
 * The mock server's "tokenizer": one token per UTF-16 code unit, offset so ids never collide with
 * small integers. Deterministic and exactly invertible, so tests can check ids against text.
 */
const OFFSET = 1000;

export function mockEncode(text: string): number[] {
  const ids: number[] = new Array(text.length);
  for (let i = 0; i < text.length; i++) ids[i] = text.charCodeAt(i) + OFFSET;
  return ids;
}

export function mockDecode(ids: readonly number[]): string {
  return String.fromCharCode(...ids.map((id) => id - OFFSET));
}

/** A deterministic, position-dependent logprob in (-1, 0). */
export function mockLogprob(tokenId: number, position: number): number {
  return -(((tokenId * 31 + position * 17) % 97) + 1) / 100;
}
