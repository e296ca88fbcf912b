import { anthropicError } from "./dialects/index.js";
import { openaiError } from "./http-util.js";
import type { LLMOperation } from "./routes.js";

/** An error body for a status, message, OpenAI error type and code. */
export type ErrorBody = (status: number, message: string, type: string, code?: string | null) => unknown;

const openai: ErrorBody = (_status, message, type, code = null) => openaiError(message, type, code);
const anthropic: ErrorBody = (status, message) => anthropicError(status, message);

/**
 * The error shape of a route's API, for errors raised before its request is parsed (auth, 404
 * `unknown_attempt`, 413, malformed JSON): Anthropic's on `/v1/messages`, so its SDKs read them, else
 * OpenAI's (the Responses API's too).
 */
export const errorBodyFor = (op: LLMOperation): ErrorBody => (op === "messages" ? anthropic : openai);
