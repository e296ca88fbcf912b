import type { CausalLM, ChatEncoder } from "@agl/trainer-gpu";
import { type ScoredRow, teacherForced } from "./copy-accuracy.js";
import { pct } from "./experiment.js";

/**
 * Where copying fails inside a number: teacher-forced accuracy on the digits the assistant writes, split
 * by the digit's place (the first digit of a number, where the model has to find the value; a later
 * digit, where it has to keep copying from the place it found) and by the number's length. A model that
 * has the later digits right and the first ones wrong copies well but does not find the value.
 */
export interface PlaceAccuracy {
  firstDigit: number;
  laterDigits: number;
  /** `byLength[k]`: digits of numbers of k + 1 digits. */
  byLength: number[];
}

export function digitAccuracyByPlace(
  model: CausalLM,
  template: ChatEncoder,
  transcripts: readonly { messages: unknown[]; tools: unknown[] | null }[],
  batchSize = 16,
): PlaceAccuracy {
  return placeAccuracy(teacherForced(model, template, transcripts, batchSize));
}

/** The split of scored rows (src/copy-accuracy.ts `teacherForced`); a number is a run of digit tokens. */
export function placeAccuracy(rows: readonly ScoredRow[]): PlaceAccuracy {
  const first: [number, number] = [0, 0];
  const later: [number, number] = [0, 0];
  const byLength: [number, number][] = [];
  for (const { pieces, mask, hit } of rows) {
    const digit = (t: number) => mask[t] === 1 && /^\d$/.test(pieces[t] ?? "");
    for (let t = 0; t < pieces.length; t++) {
      if (!digit(t) || digit(t - 1)) continue;
      let end = t;
      while (digit(end + 1)) end += 1;
      const len = end - t + 1;
      for (let u = t; u <= end; u++) {
        const h = hit[u] ? 1 : 0;
        const group = u === t ? first : later;
        group[0] += h;
        group[1] += 1;
        byLength[len - 1] ??= [0, 0];
        byLength[len - 1]![0] += h;
        byLength[len - 1]![1] += 1;
      }
      t = end;
    }
  }
  const rate = ([a, n]: [number, number]) => (n ? a / n : 0);
  return {
    firstDigit: rate(first),
    laterDigits: rate(later),
    byLength: Array.from(byLength, (g) => rate(g ?? [0, 0])),
  };
}

export const describePlaces = (p: PlaceAccuracy) =>
  `first digit ${pct(p.firstDigit)}, later ${pct(p.laterDigits)}, by length ${p.byLength.map(pct).join("/")}`;
