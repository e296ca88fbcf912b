import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import {
  messagesToChatView,
  responsesToChatView,
  sendMessagesReply,
  sendResponsesReply,
} from "./client-apis.js";
import { parseMockLLMServerOptions } from "./options.js";
import { mockEncode, mockLogprob } from "./tokens.js";

/** What the mock answers for one choice. */
export interface MockReply {
  content?: string | null;
  tool_calls?: Array<{ id?: string; name: string; arguments: string }>;
  finish_reason?: string;
  /** Answer the whole request with this HTTP error instead (e.g. 429 with `retry-after-ms`). */
  error?: { status: number; message?: string; type?: string; headers?: Record<string, string> };
}

export interface MockRequestInfo {
  path: string;
  headers: Record<string, string | string[] | undefined>;
  body: any;
}

export interface MockLLMServerOptions {
  /** Decide the reply; default echoes the last user message as "Echo: <text>". */
  respond?: (request: MockRequestInfo, choiceIndex: number) => MockReply | Promise<MockReply>;
  /** Return vLLM's token-id fields even when not asked (default: only when `return_token_ids` is true). */
  alwaysReturnTokenIds?: boolean;
  /** Answer this many requests with HTTP 500 before behaving. */
  failFirst?: number;
  /** Never answer (simulates a hung upstream). */
  hang?: boolean;
  /** In streams, destroy the socket after this many chunks. */
  dieAfterChunks?: number;
  /** Delay before answering, ms. */
  delayMs?: number;
  /** Delay between stream chunks, ms. */
  chunkDelayMs?: number;
  /** Model names listed by /v1/models; the first is the default. */
  models?: string[];
  host?: string;
  port?: number;
}

export interface MockLLMServer {
  url: string;
  /** Base URL with /v1, what an OpenAI client takes. */
  baseURL: string;
  /** Every request received, in order. */
  requests: MockRequestInfo[];
  close(): Promise<void>;
}

/**
 * A small OpenAI-compatible server that behaves like vLLM (token ids, logprobs, tool calls, n, SSE).
 * Used by tests and examples in place of a hosted model; it is a real HTTP server on loopback.
 */
export async function startMockLLMServer(input: MockLLMServerOptions = {}): Promise<MockLLMServer> {
  const options = parseMockLLMServerOptions(input);
  const requests: MockRequestInfo[] = [];
  let failuresLeft = options.failFirst ?? 0;
  let counter = 0;
  const models = options.models ?? ["mock-model"];
  /** Output items of stored responses, for `item_reference` inputs. */
  const storedItems = new Map<string, unknown>();

  const server: Server = createServer(async (req, res) => {
    try {
      const body = await readJson(req);
      const info: MockRequestInfo = { path: req.url ?? "/", headers: req.headers, body };
      requests.push(info);
      if (options.hang) return;
      if (options.delayMs) await sleep(options.delayMs);
      const path = (req.url ?? "/").split("?")[0]!;
      if (req.method === "GET" && path.endsWith("/health")) return sendJson(res, 200, { status: "ok" });
      if (req.method === "GET" && path.endsWith("/models")) {
        return sendJson(res, 200, {
          object: "list",
          data: models.map((id) => ({ id, object: "model", created: 0, owned_by: "mock" })),
        });
      }
      if (failuresLeft > 0) {
        failuresLeft--;
        return sendJson(res, 500, { error: { message: "mock upstream failure", type: "server_error" } });
      }
      if (req.method === "POST" && (path.endsWith("/responses") || path.endsWith("/messages"))) {
        // vLLM renders these to chat messages; `respond` sees that chat view of the request
        const isResponses = path.endsWith("/responses");
        const view = isResponses ? responsesToChatView(body, storedItems) : messagesToChatView(body);
        const chatInfo: MockRequestInfo = { ...info, body: view };
        const reply = options.respond ? await options.respond(chatInfo, 0) : defaultReply(view, true);
        const id = `mock${++counter}`;
        if (isResponses) return sendResponsesReply(res, id, view, reply, body, storedItems);
        return sendMessagesReply(res, id, view, reply);
      }
      const isChat = path.endsWith("/chat/completions");
      if (req.method !== "POST" || (!isChat && !path.endsWith("/completions"))) {
        return sendJson(res, 404, { error: { message: `no route ${req.method} ${path}` } });
      }
      const id = `${isChat ? "chatcmpl" : "cmpl"}-mock${++counter}`;
      const n = typeof body?.n === "number" ? body.n : 1;
      const replies: MockReply[] = [];
      for (let i = 0; i < n; i++) {
        replies.push(options.respond ? await options.respond(info, i) : defaultReply(body, isChat));
      }
      const failure = replies.find((r) => r.error)?.error;
      if (failure) {
        const { status, message = "mock error", type = "mock_error", headers } = failure;
        return sendJson(res, status, { error: { message, type } }, headers);
      }
      const promptText = isChat ? JSON.stringify(body?.messages ?? []) : String(body?.prompt ?? "");
      const withIds = options.alwaysReturnTokenIds || body?.return_token_ids === true;
      const withLogprobs = isChat ? body?.logprobs === true : typeof body?.logprobs === "number";
      const ctx = { id, model: String(body?.model ?? models[0]), promptText, withIds, withLogprobs, isChat };
      if (body?.stream) return streamReply(res, ctx, replies, options);
      return sendJson(res, 200, fullReply(ctx, replies));
    } catch (error) {
      sendJson(res, 400, {
        error: { message: String((error as Error).message), type: "invalid_request_error" },
      });
    }
  });
  await new Promise<void>((resolve) =>
    server.listen(options.port ?? 0, options.host ?? "127.0.0.1", resolve),
  );
  const { port } = server.address() as AddressInfo;
  const url = `http://${options.host ?? "127.0.0.1"}:${port}`;
  return {
    url,
    baseURL: `${url}/v1`,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

interface ReplyContext {
  id: string;
  model: string;
  promptText: string;
  withIds: boolean;
  withLogprobs: boolean;
  isChat: boolean;
}

function defaultReply(body: any, isChat: boolean): MockReply {
  if (!isChat) return { content: ` echo ${String(body?.prompt ?? "").slice(-20)}` };
  const messages: any[] = Array.isArray(body?.messages) ? body.messages : [];
  const lastUser = [...messages].reverse().find((m) => m?.role === "user");
  const text =
    typeof lastUser?.content === "string" ? lastUser.content : JSON.stringify(lastUser?.content ?? "");
  return { content: `Echo: ${text}` };
}

/** The text the reply's token ids encode: content, then each tool call as `<tool>{json}</tool>`. */
function replyText(reply: MockReply): string {
  const calls = (reply.tool_calls ?? []).map(
    (c) => `<tool>${JSON.stringify({ name: c.name, arguments: c.arguments })}</tool>`,
  );
  return (reply.content ?? "") + calls.join("");
}

function logprobContent(ids: number[]) {
  return ids.map((tokenId, i) => ({
    token: `token_id:${tokenId}`,
    logprob: mockLogprob(tokenId, i),
    bytes: null,
    top_logprobs: [],
  }));
}

function fullReply(ctx: ReplyContext, replies: MockReply[]) {
  const promptIds = mockEncode(ctx.promptText);
  const usage = { prompt_tokens: promptIds.length, completion_tokens: 0, total_tokens: 0 };
  const choices = replies.map((reply, index) => {
    const ids = mockEncode(replyText(reply));
    usage.completion_tokens += ids.length;
    const toolCalls = reply.tool_calls?.map((c, j) => ({
      id: c.id ?? `call_${ctx.id}_${index}_${j}`,
      type: "function" as const,
      function: { name: c.name, arguments: c.arguments },
    }));
    const finish = reply.finish_reason ?? (toolCalls?.length ? "tool_calls" : "stop");
    const base = ctx.isChat
      ? {
          index,
          message: {
            role: "assistant",
            content: reply.content ?? null,
            ...(toolCalls ? { tool_calls: toolCalls } : {}),
          },
          finish_reason: finish,
          logprobs: ctx.withLogprobs ? { content: logprobContent(ids) } : null,
        }
      : {
          index,
          text: reply.content ?? "",
          finish_reason: finish,
          logprobs: ctx.withLogprobs ? { token_logprobs: ids.map((t, i) => mockLogprob(t, i)) } : null,
          ...(ctx.withIds ? { prompt_token_ids: promptIds } : {}),
        };
    return ctx.withIds ? { ...base, token_ids: ids } : base;
  });
  usage.total_tokens = usage.prompt_tokens + usage.completion_tokens;
  return {
    id: ctx.id,
    object: ctx.isChat ? "chat.completion" : "text_completion",
    created: Math.floor(Date.now() / 1000),
    model: ctx.model,
    choices,
    usage,
    ...(ctx.withIds && ctx.isChat ? { prompt_token_ids: promptIds } : {}),
  };
}

/** vLLM-style SSE: prompt ids on the first chunk, output ids (and logprobs) per chunk, usage at the end. */
async function streamReply(
  res: ServerResponse,
  ctx: ReplyContext,
  replies: MockReply[],
  options: MockLLMServerOptions,
) {
  res.writeHead(200, {
    "content-type": "text/event-stream",
    "cache-control": "no-cache",
    connection: "keep-alive",
  });
  const created = Math.floor(Date.now() / 1000);
  const object = ctx.isChat ? "chat.completion.chunk" : "text_completion";
  const promptIds = mockEncode(ctx.promptText);
  let sent = 0;
  const send = async (payload: unknown) => {
    if (options.dieAfterChunks !== undefined && sent >= options.dieAfterChunks) {
      res.socket?.destroy();
      throw new Error("mock: connection dropped");
    }
    res.write(`data: ${JSON.stringify(payload)}\n\n`);
    sent++;
    if (options.chunkDelayMs) await sleep(options.chunkDelayMs);
  };
  try {
    let completionTokens = 0;
    for (const [index, reply] of replies.entries()) {
      const text = reply.content ?? "";
      const pieces = text.match(/.{1,4}/gs) ?? [];
      let position = 0;
      const first = index === 0;
      if (ctx.isChat) {
        await send({
          id: ctx.id,
          object,
          created,
          model: ctx.model,
          choices: [
            { index, delta: { role: "assistant", content: "" }, finish_reason: null, logprobs: null },
          ],
          ...(ctx.withIds && first ? { prompt_token_ids: promptIds } : {}),
        });
      }
      const chunkFor = (piece: string, extra: Record<string, unknown>) => {
        const ids = mockEncode(piece);
        const lp = ids.map((t, i) => ({
          token: `token_id:${t}`,
          logprob: mockLogprob(t, position + i),
          bytes: null,
          top_logprobs: [],
        }));
        position += ids.length;
        completionTokens += ids.length;
        const choice = ctx.isChat
          ? { index, delta: extra, finish_reason: null, logprobs: ctx.withLogprobs ? { content: lp } : null }
          : {
              index,
              text: piece,
              finish_reason: null,
              logprobs: ctx.withLogprobs ? { token_logprobs: lp.map((x) => x.logprob) } : null,
            };
        return { ...choice, ...(ctx.withIds ? { token_ids: ids } : {}) };
      };
      for (const piece of pieces) {
        const choice = chunkFor(piece, { content: piece });
        await send({
          id: ctx.id,
          object,
          created,
          model: ctx.model,
          choices: [choice],
          ...(!ctx.isChat && ctx.withIds && position === mockEncode(piece).length
            ? { prompt_token_ids: promptIds }
            : {}),
        });
      }
      for (const [j, call] of (reply.tool_calls ?? []).entries()) {
        const encoded = `<tool>${JSON.stringify({ name: call.name, arguments: call.arguments })}</tool>`;
        const choice = chunkFor(encoded, {
          tool_calls: [
            {
              index: j,
              id: call.id ?? `call_${ctx.id}_${index}_${j}`,
              type: "function",
              function: { name: call.name, arguments: call.arguments },
            },
          ],
        });
        await send({ id: ctx.id, object, created, model: ctx.model, choices: [choice] });
      }
      const finish = reply.finish_reason ?? (reply.tool_calls?.length ? "tool_calls" : "stop");
      await send({
        id: ctx.id,
        object,
        created,
        model: ctx.model,
        choices: [
          ctx.isChat
            ? { index, delta: {}, finish_reason: finish, logprobs: null }
            : { index, text: "", finish_reason: finish, logprobs: null },
        ],
      });
    }
    await send({
      id: ctx.id,
      object,
      created,
      model: ctx.model,
      choices: [],
      usage: {
        prompt_tokens: promptIds.length,
        completion_tokens: completionTokens,
        total_tokens: promptIds.length + completionTokens,
      },
    });
    res.write("data: [DONE]\n\n");
    res.end();
  } catch {
    // the connection was dropped on purpose
  }
}

function readJson(req: IncomingMessage): Promise<any> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const text = Buffer.concat(chunks).toString("utf8");
      if (!text) return resolve(null);
      try {
        resolve(JSON.parse(text));
      } catch {
        reject(new Error("request body is not valid JSON"));
      }
    });
    req.on("error", reject);
  });
}

function sendJson(res: ServerResponse, status: number, payload: unknown, headers?: Record<string, string>) {
  const text = JSON.stringify(payload);
  res.writeHead(status, {
    ...headers,
    "content-type": "application/json",
    "content-length": Buffer.byteLength(text),
  });
  res.end(text);
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
