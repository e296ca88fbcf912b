/** Checks of numeric command-line options, shared by the job's and pretrain-base's parsers. */
export type Check = [(n: number) => boolean, string];
export const INT1: Check = [(n) => Number.isInteger(n) && n >= 1, "an integer >= 1"];
export const INT0: Check = [(n) => Number.isInteger(n) && n >= 0, "an integer >= 0"];
export const POSITIVE: Check = [(n) => n > 0, "a positive number"];
export const SHARE: Check = [(n) => n >= 0 && n <= 1, "a number from 0 to 1"];

/** Each named option as a number, and one message per option that is not a number passing its check. */
export function checkNumbers(
  values: Record<string, string | undefined>,
  checks: Record<string, Check>,
): { numbers: Record<string, number>; problems: string[] } {
  const problems: string[] = [];
  const numbers: Record<string, number> = {};
  for (const [name, [ok, what]] of Object.entries(checks)) {
    const raw = values[name] ?? "";
    const n = Number(raw);
    if (raw.trim() === "" || !Number.isFinite(n) || !ok(n))
      problems.push(`--${name} must be ${what}, got "${raw}"`);
    numbers[name] = n;
  }
  return { numbers, problems };
}
