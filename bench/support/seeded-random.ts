/** A small seeded generator (an LCG) for benchmark payloads: the same seed gives the same bytes every run. */
export function seededRandom(seed: number) {
  let state = seed;
  const rand = () => {
    state = (state * 1103515245 + 12345) & 0x7fffffff;
    return state / 0x7fffffff;
  };
  const randint = (lo: number, hi: number) => lo + Math.floor(rand() * (hi - lo + 1));
  const ALPHABET = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 ";
  const randomString = (lo: number, hi: number) => {
    let s = "";
    for (let i = randint(lo, hi); i > 0; i--) s += ALPHABET[Math.floor(rand() * ALPHABET.length)];
    return s;
  };
  return { rand, randint, randomString };
}
