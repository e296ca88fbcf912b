/**
 * Regenerates packages/adapter/test/fixtures/*.json by running the REAL instrumentation libraries
 * against the local vLLM-like mock server, for one fixed two-turn tool-calling conversation whose user
 * message carries two images (an https URL and a data URL), so every family's image encoding is recorded.
 *
 *   pnpm --filter @agl/adapter fixtures          (or: pnpm exec tsx packages/adapter/scripts/generate-fixtures.ts)
 *   … generate-fixtures.ts [family] [--out DIR]  (one family; another directory, used by the reproducibility test)
 *
 * Each family runs in its own child process because the instrumentations patch the same `openai`
 * prototypes. Every fixture holds the spans (converted to the store's Span shape) and the HTTP
 * exchange the mock server saw, which the tests use as ground truth.
 */
import { spawn } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { spanFromReadable } from "@agl/core";
import { startMockLLMServer } from "@agl/core/mock-llm";
import { context } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
} from "@opentelemetry/sdk-trace-base";

const here = dirname(fileURLToPath(import.meta.url));

export const FAMILIES = [
  "genai-new",
  "genai-old",
  "openinference",
  "vercel-ai",
  "vercel-ai-stream",
  "langfuse",
  "agl",
  "agl-stream",
] as const;
type Family = (typeof FAMILIES)[number];

const SYSTEM = "You are a calculator. Use the add tool.";
const QUESTION = "What is 2+3?";
const TOOL_RESULT = "5";
const FINAL = "The answer is 5.";
const TOOL_CALL_ID = "call_add_1";
/** Two encodings, because libraries record them differently (OTel GenAI: `uri` vs `blob` parts). */
export const IMAGE_URLS = [
  "https://example.com/two-plus-three.png",
  // a 1×1 PNG; small so the fixtures stay readable
  "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII=",
] as const;
/** The user turn in OpenAI chat format: the question, then the images. */
const USER_CONTENT = [
  { type: "text" as const, text: QUESTION },
  ...IMAGE_URLS.map((url) => ({ type: "image_url" as const, image_url: { url } })),
];
const TOOLS = [
  {
    type: "function" as const,
    function: {
      name: "add",
      description: "Add two integers",
      parameters: {
        type: "object",
        properties: { a: { type: "integer" }, b: { type: "integer" } },
        required: ["a", "b"],
        additionalProperties: false,
      },
    },
  },
];

interface Exchange {
  request: any;
  /** The JSON response, or for streamed calls the SSE events' payloads. */
  response: any;
  stream?: boolean;
}

async function runFamily(family: Family, outDir: string): Promise<void> {
  const mock = await startMockLLMServer({
    respond: (req) => {
      const messages: any[] = req.body?.messages ?? [];
      if (messages.some((m) => m.role === "tool")) return { content: FINAL };
      return { content: null, tool_calls: [{ id: TOOL_CALL_ID, name: "add", arguments: '{"a":2,"b":3}' }] };
    },
  });
  const exchanges: Exchange[] = [];
  const recordingFetch: typeof fetch = async (input, init) => {
    const response = await fetch(input, init);
    const text = await response.clone().text();
    const request = JSON.parse(String(init?.body ?? "null"));
    if (response.headers.get("content-type")?.includes("event-stream")) {
      const events = text
        .split("\n\n")
        .map((block) => block.replace(/^data: /, "").trim())
        .filter((data) => data && data !== "[DONE]")
        .map((data) => JSON.parse(data));
      exchanges.push({ request, response: events, stream: true });
    } else exchanges.push({ request, response: JSON.parse(text) });
    return response;
  };
  // Without a context manager, nested spans (Vercel's doGenerate under generateText) lose their parent.
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  const exporter = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
  const versions: Record<string, string> = {};
  try {
    const { default: OpenAI } = await import("openai");
    const client = () => new OpenAI({ baseURL: mock.baseURL, apiKey: "test", fetch: recordingFetch });
    /** The same conversation, streamed: the stream is read to the end and reassembled into a message. */
    const streamedConversation = async (create: (body: any) => Promise<any>) => {
      const messages: any[] = [
        { role: "system", content: SYSTEM },
        { role: "user", content: USER_CONTENT },
      ];
      for (let turn = 0; turn < 2; turn++) {
        const stream = await create({
          model: "mock-model",
          messages,
          tools: TOOLS,
          stream: true,
          return_token_ids: true,
          logprobs: true,
        });
        const message: any = { role: "assistant", content: null };
        for await (const chunk of stream) {
          const delta = chunk.choices?.[0]?.delta ?? {};
          if (delta.content) message.content = (message.content ?? "") + delta.content;
          for (const call of delta.tool_calls ?? []) {
            message.tool_calls ??= [];
            message.tool_calls[call.index] ??= {
              id: call.id,
              type: "function",
              function: { name: "", arguments: "" },
            };
            message.tool_calls[call.index].function.name += call.function?.name ?? "";
            message.tool_calls[call.index].function.arguments += call.function?.arguments ?? "";
          }
        }
        messages.push(message);
        if (turn === 0)
          messages.push({ role: "tool", tool_call_id: message.tool_calls[0].id, content: TOOL_RESULT });
      }
    };
    const conversation = async (create: (body: any) => Promise<any>) => {
      const messages: any[] = [
        { role: "system", content: SYSTEM },
        { role: "user", content: USER_CONTENT },
      ];
      const first = await create({
        model: "mock-model",
        messages,
        tools: TOOLS,
        return_token_ids: true,
        logprobs: true,
      });
      messages.push(first.choices[0].message);
      messages.push({
        role: "tool",
        tool_call_id: first.choices[0].message.tool_calls[0].id,
        content: TOOL_RESULT,
      });
      await create({ model: "mock-model", messages, tools: TOOLS, return_token_ids: true, logprobs: true });
    };

    if (family === "genai-new" || family === "genai-old" || family === "openinference") {
      const pkg =
        family === "genai-new"
          ? "@traceloop/instrumentation-openai"
          : family === "genai-old"
            ? "traceloop-openai-legacy"
            : "@arizeai/openinference-instrumentation-openai";
      versions[pkg] = await packageVersion(pkg);
      const mod: any = await import(pkg);
      const instrumentation = new mod.OpenAIInstrumentation({ traceContent: true, enrichTokens: false });
      instrumentation.setTracerProvider(provider);
      if (family === "openinference") instrumentation.manuallyInstrument({ OpenAI });
      else instrumentation.manuallyInstrument(OpenAI);
      const c = client();
      await conversation((body) => c.chat.completions.create(body));
    } else if (family === "langfuse") {
      versions["@langfuse/openai"] = await packageVersion("@langfuse/openai");
      const { setLangfuseTracerProvider } = await import("@langfuse/tracing");
      const { observeOpenAI } = await import("@langfuse/openai");
      setLangfuseTracerProvider(provider);
      const c = observeOpenAI(client(), { generationName: "calculator-turn" });
      await conversation((body) => c.chat.completions.create(body));
    } else if (family === "vercel-ai" || family === "vercel-ai-stream") {
      versions.ai = await packageVersion("ai");
      versions["@ai-sdk/openai-compatible"] = await packageVersion("@ai-sdk/openai-compatible");
      const { generateText, streamText, tool, stepCountIs, jsonSchema } = await import("ai");
      const { createOpenAICompatible } = await import("@ai-sdk/openai-compatible");
      const mockProvider = createOpenAICompatible({
        name: "mock",
        baseURL: mock.baseURL,
        apiKey: "test",
        fetch: recordingFetch,
        includeUsage: true,
        // Without this the SDK downloads https images itself and sends their bytes (needs the network).
        supportedUrls: () => ({ "image/*": [/^https?:\/\//] }),
      });
      const settings = {
        model: mockProvider.chatModel("mock-model"),
        system: SYSTEM,
        messages: [
          {
            role: "user" as const,
            content: [
              { type: "text" as const, text: QUESTION },
              ...IMAGE_URLS.map((url) => ({ type: "image" as const, image: url })),
            ],
          },
        ],
        tools: {
          add: tool({
            description: "Add two integers",
            inputSchema: jsonSchema<{ a: number; b: number }>(TOOLS[0]!.function.parameters as any),
            execute: async ({ a, b }) => String(a + b),
          }),
        },
        stopWhen: stepCountIs(2),
        providerOptions: { mock: { return_token_ids: true, logprobs: true } },
        experimental_telemetry: {
          isEnabled: true,
          tracer: provider.getTracer("ai"),
          functionId: "calculator",
        },
      };
      if (family === "vercel-ai") await generateText(settings);
      else {
        const result = streamText(settings);
        for await (const _ of result.textStream);
        await result.response;
      }
    } else if (family === "agl" || family === "agl-stream") {
      versions["@agl/core"] = "workspace";
      const { LightningTracer, instrumentOpenAI } = await import("@agl/core");
      const tracer = new LightningTracer({
        name: "fixture",
        spanProcessors: [new SimpleSpanProcessor(exporter)],
      });
      const c = instrumentOpenAI(client(), { tracer });
      if (family === "agl") await conversation((body) => c.chat.completions.create(body));
      else await streamedConversation((body) => c.chat.completions.create(body));
      await tracer.provider.forceFlush(); // not shutdown: that would clear the shared in-memory exporter
    }
    await provider.forceFlush();
    const spans = exporter
      .getFinishedSpans()
      .map((readable, i) =>
        spanFromReadable(readable, { rolloutId: "ro-fixture", attemptId: "at-fixture", sequenceId: i + 1 }),
      );
    mkdirSync(outDir, { recursive: true });
    const file = join(outDir, `${family}.json`);
    writeFileSync(
      file,
      `${JSON.stringify({ family, generatedBy: "scripts/generate-fixtures.ts", versions, exchanges, spans }, null, 2)}\n`,
    );
    console.log(`${family}: ${spans.length} spans, ${exchanges.length} HTTP exchanges -> ${file}`);
  } finally {
    await provider.shutdown();
    await mock.close();
  }
}

async function packageVersion(name: string): Promise<string> {
  const { createRequire } = await import("node:module");
  const require = createRequire(import.meta.url);
  const { readFileSync } = await import("node:fs");
  let dir = dirname(require.resolve(name));
  for (;;) {
    try {
      const pkg = JSON.parse(readFileSync(join(dir, "package.json"), "utf8"));
      if (pkg.version && (pkg.name === name || name === "traceloop-openai-legacy")) return pkg.version;
    } catch {
      // keep climbing
    }
    const up = dirname(dir);
    if (up === dir) return "unknown";
    dir = up;
  }
}

/** `[family] [--out DIR]`; the default directory is the committed fixtures. */
function parseArgs(argv: string[]): { family: Family | null; outDir: string } {
  let family: Family | null = null;
  let outDir = join(here, "..", "test", "fixtures");
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (arg === "--out") {
      const value = argv[++i];
      if (!value) throw new Error("--out needs a directory");
      outDir = resolve(value);
    } else if ((FAMILIES as readonly string[]).includes(arg)) family = arg as Family;
    else throw new Error(`unknown argument ${arg}; expected one of ${FAMILIES.join(", ")} or --out DIR`);
  }
  return { family, outDir };
}

const { family: requested, outDir } = parseArgs(process.argv.slice(2));
if (requested) await runFamily(requested, outDir);
else {
  // One child per family (see the header); run concurrently, since each mostly waits on loopback HTTP.
  const results = await Promise.all(
    FAMILIES.map(
      (family) =>
        new Promise<number | null>((done) => {
          const child = spawn(
            process.execPath,
            [...process.execArgv, fileURLToPath(import.meta.url), family, "--out", outDir],
            { stdio: "inherit" },
          );
          child.on("close", (code) => {
            if (code !== 0) console.error(`${family}: generation failed (exit ${code})`);
            done(code);
          });
        }),
    ),
  );
  process.exit(results.every((code) => code === 0) ? 0 : 1);
}
