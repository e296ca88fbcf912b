/**
 * Nesting depth of JSON text, measured before it is parsed. JSON.parse builds every array and object
 * before any rule can look at the value, so a 30 MB body of `[[[[…` costs over a gigabyte of memory
 * just to be refused for its depth afterwards. A linear scan of the text (strings skipped) bounds that
 * cost: servers refuse an over-deep body before parsing it.
 */
import { MAX_NESTING_DEPTH } from "./input-rules.js";

/**
 * Deepest nesting a JSON request body may have: every field's own limit (MAX_NESTING_DEPTH) plus
 * room for the body's envelope (`{"rollouts": [{"input": …}]}`, `{"spans": [{"attributes": …}]}`).
 */
export const MAX_BODY_NESTING_DEPTH = 2 * MAX_NESTING_DEPTH;
/**
 * The same for OTLP/JSON, where one level of an attribute value is four levels of JSON
 * (`{"kvlistValue": {"values": [{"key": …, "value": …}]}}`) below a dozen levels of envelope.
 */
export const MAX_OTLP_JSON_NESTING_DEPTH = 4 * MAX_NESTING_DEPTH + 16;
/**
 * Bodies shorter than this are not scanned: parsing them costs a few MB at most, whatever their shape,
 * and the input rules still reject a deep value afterwards.
 */
export const NESTING_SCAN_MIN_LENGTH = 64 * 1024;

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_ARRAY = 0x5b;
const CLOSE_ARRAY = 0x5d;
const OPEN_OBJECT = 0x7b;
const CLOSE_OBJECT = 0x7d;

/**
 * Whether JSON `text` (a string, or UTF-8 bytes) nests arrays/objects deeper than `maxDepth`. One pass,
 * no allocation; brackets inside strings do not count. Text that is not JSON gives an arbitrary answer
 * (the parser rejects it anyway).
 */
export function jsonNestsDeeperThan(text: string | Uint8Array, maxDepth: number): boolean {
  const bytes = typeof text !== "string";
  const length = text.length;
  let depth = 0;
  let inString = false;
  for (let i = 0; i < length; i++) {
    // Every character that matters is ASCII, so UTF-16 units and UTF-8 bytes scan alike.
    const c = bytes ? (text as Uint8Array)[i]! : (text as string).charCodeAt(i);
    if (inString) {
      if (c === BACKSLASH) i++;
      else if (c === QUOTE) inString = false;
    } else if (c === QUOTE) {
      inString = true;
    } else if (c === OPEN_ARRAY || c === OPEN_OBJECT) {
      if (++depth > maxDepth) return true;
    } else if (c === CLOSE_ARRAY || c === CLOSE_OBJECT) {
      depth--;
    }
  }
  return false;
}

/** {@link jsonNestsDeeperThan} for request bodies: bodies under NESTING_SCAN_MIN_LENGTH pass unscanned. */
export function bodyNestsTooDeep(text: string | Uint8Array, maxDepth: number): boolean {
  return text.length >= NESTING_SCAN_MIN_LENGTH && jsonNestsDeeperThan(text, maxDepth);
}
