import { isLosslessNumber, type LosslessNumber, parse } from "lossless-json";

/**
 * JSON text exactly as Python's `json.dumps(value, ensure_ascii=False)` writes it: `", "` and `": "`
 * separators, non-ASCII characters kept, integers kept digit for digit and floats in Python's `repr`
 * form (`1.0`, `1e-05`, `1e+16`). vLLM serialises parsed tool-call arguments this way, and Qwen-style
 * models were trained on that spelling, so matching it keeps a re-rendered call identical to the one the
 * model wrote. Input is JSON text, parsed losslessly (a number's literal decides int versus float).
 */
export function pythonJsonDumps(jsonText: string): string {
  return dumpValue(parse(jsonText));
}

/** The same serialisation for an already parsed JavaScript value (numbers are floats unless integral). */
export function pythonJsonDumpsValue(value: unknown): string {
  return dumpValue(value);
}

function dumpValue(value: unknown): string {
  if (value === null || value === undefined) return "null";
  if (value === true) return "true";
  if (value === false) return "false";
  if (typeof value === "string") return dumpString(value);
  if (typeof value === "number") return Number.isInteger(value) ? String(value) : pythonFloatRepr(value);
  if (typeof value === "bigint") return value.toString();
  if (isLosslessNumber(value)) return dumpNumberLiteral((value as LosslessNumber).value);
  if (Array.isArray(value)) return `[${value.map(dumpValue).join(", ")}]`;
  if (typeof value === "object") {
    const entries = Object.entries(value as Record<string, unknown>);
    return `{${entries.map(([k, v]) => `${dumpString(k)}: ${dumpValue(v)}`).join(", ")}}`;
  }
  return dumpString(String(value));
}

function dumpNumberLiteral(literal: string): string {
  if (!/[.eE]/.test(literal)) return BigInt(literal).toString();
  return pythonFloatRepr(Number(literal));
}

/** Python's `repr(float)`: shortest round-trip digits, exponent form when exp < -4 or exp >= 16. */
export function pythonFloatRepr(x: number): string {
  if (Number.isNaN(x)) return "NaN";
  if (!Number.isFinite(x)) return x > 0 ? "Infinity" : "-Infinity";
  if (x === 0) return Object.is(x, -0) ? "-0.0" : "0.0";
  const [mantissa, expText] = x.toExponential().split("e") as [string, string];
  const exp = Number(expText);
  const negative = mantissa.startsWith("-");
  const digits = mantissa.replace("-", "").replace(".", "");
  const sign = negative ? "-" : "";
  if (exp < -4 || exp >= 16) {
    const m = digits.length > 1 ? `${digits[0]}.${digits.slice(1)}` : digits;
    const e = Math.abs(exp) < 10 ? `0${Math.abs(exp)}` : String(Math.abs(exp));
    return `${sign}${m}e${exp < 0 ? "-" : "+"}${e}`;
  }
  if (exp < 0) return `${sign}0.${"0".repeat(-exp - 1)}${digits}`;
  const intPart = digits.slice(0, exp + 1).padEnd(exp + 1, "0");
  const frac = digits.slice(exp + 1);
  return `${sign}${intPart}.${frac.length > 0 ? frac : "0"}`;
}

const ESCAPES: Record<string, string> = {
  '"': '\\"',
  "\\": "\\\\",
  "\n": "\\n",
  "\r": "\\r",
  "\t": "\\t",
  "\b": "\\b",
  "\f": "\\f",
};

/** Python escapes `"`, `\` and control characters below U+0020 only (ensure_ascii=False). */
function dumpString(s: string): string {
  let out = '"';
  for (const ch of s) {
    const esc = ESCAPES[ch];
    if (esc !== undefined) out += esc;
    else if (ch < " ") out += `\\u${ch.charCodeAt(0).toString(16).padStart(4, "0")}`;
    else out += ch;
  }
  return `${out}"`;
}
