import { readTokenFields } from "@agl/adapter";
import type { Span } from "@agl/core";

/**
 * The text of token ids, as far as a rollout's spans tell it. The store holds ids, not a tokenizer;
 * what carries text is a call's per-token logprobs (`logprobs.content[i].token`, which our proxy keeps
 * when bodies are captured or top_logprobs were asked for, and client spans record), paired with that
 * call's response ids. Ids seen there are decoded wherever they appear (prompts included); others stay
 * ids. vLLM's `return_tokens_as_token_ids` pieces ("token_id:42") carry no text and are skipped.
 */
export function tokenTextOf(spans: readonly Span[]): Map<number, string> {
  const text = new Map<number, string>();
  for (const span of spans) {
    const a = span.attributes ?? {};
    const ids = readTokenFields(a).responseTokenIds;
    if (!ids || ids.length === 0) continue;
    const pieces =
      logprobTokens(a["logprobs.content"]) ?? logprobTokens(bodyLogprobs(a["agl.proxy.response"]));
    if (!pieces || pieces.length !== ids.length) continue;
    ids.forEach((id, i) => {
      const piece = pieces[i];
      if (typeof piece === "string" && !/^token_id:\d+$/.test(piece)) text.set(id, piece);
    });
  }
  return text;
}

function parsed(value: unknown): unknown {
  if (typeof value !== "string") return value;
  try {
    return JSON.parse(value);
  } catch {
    return null;
  }
}

function logprobTokens(value: unknown): Array<string | null> | null {
  const list = parsed(value);
  if (!Array.isArray(list)) return null;
  return list.map((entry) => (typeof entry?.token === "string" ? entry.token : null));
}

function bodyLogprobs(value: unknown): unknown {
  const body = parsed(value) as { choices?: Array<{ logprobs?: { content?: unknown } }> } | null;
  return body?.choices?.[0]?.logprobs?.content ?? null;
}

/** A piece as a tokenizer playground shows it: spaces, tabs and newlines visible. */
export function showPiece(piece: string): string {
  return piece.replace(/ /g, "·").replace(/\t/g, "→").replace(/\r?\n/g, "↵");
}
