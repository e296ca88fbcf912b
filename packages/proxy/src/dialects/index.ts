import type { ClientDialect } from "./dialect.js";
import { MessagesDialect } from "./messages-dialect.js";
import { messagesToChat, parseMessagesRequest } from "./messages-request.js";
import type { ResponseHistory, ResponseScope } from "./response-history.js";
import { ResponsesDialect } from "./responses-dialect.js";
import { parseResponsesRequest, responsesToChat } from "./responses-request.js";

export type { ClientDialect, DialectStream } from "./dialect.js";
export { DialectRequestError } from "./dialect.js";
export { anthropicError } from "./messages-dialect.js";
export {
  ResponseHistory,
  type ResponseHistoryOptions,
  type ResponseScope,
  ResponseStateUnavailableError,
  type SpanLookup,
} from "./response-history.js";

/**
 * A `/v1/responses` or `/v1/messages` body as the chat/completions request sent upstream, and the dialect
 * that answers the client. Throws DialectRequestError (→ 400 naming the field) for what cannot be served.
 */
export async function translateClientRequest(
  api: "responses" | "messages",
  body: unknown,
  history: ResponseHistory,
  scope: ResponseScope | null,
  /** The span id the call will be recorded under (Responses ids name it, see response-state.ts). */
  spanId: string,
): Promise<{ chat: Record<string, any>; dialect: ClientDialect }> {
  if (api === "messages") {
    const request = parseMessagesRequest(body);
    return { chat: messagesToChat(request), dialect: new MessagesDialect(request) };
  }
  const request = parseResponsesRequest(body);
  const { chat, conversation } = await responsesToChat(request, history, scope);
  return {
    chat,
    dialect: new ResponsesDialect(request, chat.messages, conversation, history, scope, spanId),
  };
}
