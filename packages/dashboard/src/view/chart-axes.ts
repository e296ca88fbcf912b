/**
 * Axis helpers for the training charts. uPlot's defaults label a nearly flat series (an entropy of
 * 4.6761..4.6764) with ticks that all read "4.676", and put ticks at fractional training steps.
 */

/** Tick increments of the step axis: integers only (1, 2, 5, 10, 20, 50, ...). */
export const STEP_INCREMENTS: number[] = Array.from({ length: 16 }, (_, i) =>
  [1, 2, 5].map((m) => m * 10 ** i),
).flat();

/** A step tick's label: the integer, or nothing for a split that is not one. */
export function stepLabel(value: number): string {
  return Number.isInteger(value) ? String(value) : "";
}

/**
 * The y range for data from `min` to `max`: 5% padding each side, and a flat (or single-point) series
 * gets a band around its value instead of a zero-height range.
 */
export function yRange(min: number | null, max: number | null): [number, number] {
  if (min === null || max === null || !Number.isFinite(min) || !Number.isFinite(max)) return [0, 1];
  const span = max - min;
  const scale = Math.max(Math.abs(min), Math.abs(max));
  if (span <= scale * 1e-9) {
    const pad = scale === 0 ? 1 : scale * 0.05;
    return [min - pad, max + pad];
  }
  return [min - span * 0.05, max + span * 0.05];
}

/**
 * Labels for y ticks, with as few decimals as keep neighbouring ticks distinct and each label true to
 * its tick (0.25 reads "0.25", not "0.3"); exponent notation for very large or very small magnitudes.
 */
export function tickLabels(values: readonly number[]): string[] {
  const finite = values.filter((v) => Number.isFinite(v));
  if (finite.length === 0) return values.map(() => "");
  const magnitude = Math.max(...finite.map(Math.abs));
  const exponent = magnitude >= 1e6 || (magnitude > 0 && magnitude < 1e-4);
  const sorted = [...new Set(finite)].sort((a, b) => a - b);
  const spacing = sorted.length > 1 ? Math.min(...sorted.slice(1).map((v, i) => v - sorted[i]!)) : magnitude;
  // A label may round a tick by far less than the tick spacing (0.25 must not read "0.3").
  const tolerance = Math.max(spacing * 1e-3, magnitude * 1e-12);
  for (let digits = exponent ? 1 : 0; digits <= 15; digits++) {
    const labels = values.map((v) => (!Number.isFinite(v) ? "" : format(v, digits, exponent)));
    const exact = values.every((v, i) => !Number.isFinite(v) || Math.abs(Number(labels[i]) - v) <= tolerance);
    if (exact && new Set(labels).size === new Set(values).size) return labels;
  }
  return values.map((v) => String(v));
}

function format(value: number, digits: number, exponent: boolean): string {
  if (exponent) return value.toExponential(digits);
  const text = value.toFixed(digits);
  // "-0" and "-0.00" read as a different number from 0.
  return Number(text) === 0 ? (0).toFixed(digits) : text;
}
