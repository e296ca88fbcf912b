/**
 * A parser for the Python literals LiteLLM writes into span attributes with `str(obj)`:
 * dicts, lists, tuples, single/double-quoted strings, ints, floats, True/False/None.
 * Anything else (function reprs, sets of objects) is a syntax error: we never evaluate code.
 */
export function parsePythonLiteral(text: string): unknown {
  const parser = new LiteralParser(text);
  const value = parser.value();
  parser.skipSpace();
  if (!parser.done()) throw parser.error("trailing characters");
  return value;
}

const ESCAPES: Record<string, string> = {
  n: "\n",
  t: "\t",
  r: "\r",
  "\\": "\\",
  "'": "'",
  '"': '"',
  "0": "\0",
  b: "\b",
  f: "\f",
};

class LiteralParser {
  private pos = 0;
  constructor(private readonly text: string) {}

  done(): boolean {
    return this.pos >= this.text.length;
  }

  error(what: string): SyntaxError {
    return new SyntaxError(`Python literal: ${what} at offset ${this.pos}`);
  }

  skipSpace(): void {
    while (this.pos < this.text.length && /\s/.test(this.text[this.pos]!)) this.pos++;
  }

  value(): unknown {
    this.skipSpace();
    const c = this.text[this.pos];
    if (c === undefined) throw this.error("unexpected end");
    if (c === "{") return this.dict();
    if (c === "[") return this.sequence("[", "]");
    if (c === "(") return this.sequence("(", ")");
    if (c === "'" || c === '"') return this.string();
    if (/[-+\d.]/.test(c)) return this.number();
    for (const [word, val] of [
      ["True", true],
      ["False", false],
      ["None", null],
      ["true", true],
      ["false", false],
      ["null", null],
    ] as const) {
      if (this.text.startsWith(word, this.pos)) {
        this.pos += word.length;
        return val;
      }
    }
    throw this.error(`unexpected character ${JSON.stringify(c)}`);
  }

  private dict(): Record<string, unknown> {
    this.pos++;
    const out: Record<string, unknown> = {};
    for (;;) {
      this.skipSpace();
      if (this.text[this.pos] === "}") {
        this.pos++;
        return out;
      }
      const key = this.value();
      this.skipSpace();
      if (this.text[this.pos] !== ":") throw this.error("expected ':'");
      this.pos++;
      out[String(key)] = this.value();
      this.skipSpace();
      if (this.text[this.pos] === ",") this.pos++;
      else if (this.text[this.pos] !== "}") throw this.error("expected ',' or '}'");
    }
  }

  private sequence(open: string, close: string): unknown[] {
    this.pos++;
    const out: unknown[] = [];
    for (;;) {
      this.skipSpace();
      if (this.text[this.pos] === close) {
        this.pos++;
        return out;
      }
      out.push(this.value());
      this.skipSpace();
      if (this.text[this.pos] === ",") this.pos++;
      else if (this.text[this.pos] !== close) throw this.error(`expected ',' or '${close}' after ${open}…`);
    }
  }

  private string(): string {
    const quote = this.text[this.pos]!;
    const triple = this.text.startsWith(quote.repeat(3), this.pos);
    this.pos += triple ? 3 : 1;
    let out = "";
    for (;;) {
      const c = this.text[this.pos];
      if (c === undefined) throw this.error("unterminated string");
      if (c === "\\") {
        const e = this.text[this.pos + 1]!;
        if (e === "x") {
          out += String.fromCharCode(Number.parseInt(this.text.slice(this.pos + 2, this.pos + 4), 16));
          this.pos += 4;
        } else if (e === "u") {
          out += String.fromCharCode(Number.parseInt(this.text.slice(this.pos + 2, this.pos + 6), 16));
          this.pos += 6;
        } else if (e === "U") {
          out += String.fromCodePoint(Number.parseInt(this.text.slice(this.pos + 2, this.pos + 10), 16));
          this.pos += 10;
        } else {
          out += ESCAPES[e] ?? `\\${e}`;
          this.pos += 2;
        }
        continue;
      }
      if (triple ? this.text.startsWith(quote.repeat(3), this.pos) : c === quote) {
        this.pos += triple ? 3 : 1;
        return out;
      }
      out += c;
      this.pos++;
    }
  }

  private number(): number {
    const match = /^[-+]?(\d[\d_]*)?(\.\d*)?([eE][-+]?\d+)?/.exec(this.text.slice(this.pos));
    const raw = match?.[0] ?? "";
    if (raw === "" || raw === "-" || raw === "+" || raw === ".") throw this.error("bad number");
    this.pos += raw.length;
    return Number(raw.replaceAll("_", ""));
  }
}
