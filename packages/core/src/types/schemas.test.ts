import { describe, expect, it } from "vitest";
import { rollout } from "../agent/rollout.js";
import { operation } from "../emitters/operation.js";
import { InvalidArgumentError } from "../errors.js";
import { startMockLLMServer } from "../mock-llm/index.js";
import { Runner } from "../runner/runner.js";
import { InMemoryLightningStore } from "../store/memory-store.js";
import { LightningTracer } from "../tracing/tracer.js";
import { Baseline } from "../trainer/baseline.js";
import { Trainer } from "../trainer/trainer.js";
import { TripletSchema, WorkerSchema } from "./misc.js";
import {
  llm,
  NamedResourcesSchema,
  promptTemplate,
  proxyLLM,
  ResourceSchema,
  ResourcesUpdateSchema,
} from "./resources.js";
import {
  AttemptedRolloutSchema,
  AttemptSchema,
  EnqueueRolloutRequestSchema,
  RolloutConfigSchema,
  RolloutSchema,
} from "./rollout.js";
import { SpanSchema } from "./span.js";
import { parseOrThrow } from "./validate.js";

/** The `field` of the InvalidArgumentError `fn` throws; anything else (or no error) fails the test. */
function fieldOf(fn: () => unknown): string {
  try {
    fn();
  } catch (error) {
    if (InvalidArgumentError.isInstance(error)) {
      expect(error.message).toContain(error.field);
      return error.field;
    }
    throw error;
  }
  throw new Error("expected an InvalidArgumentError, but the call succeeded");
}

async function fieldOfAsync(fn: () => Promise<unknown>): Promise<string> {
  try {
    await fn();
  } catch (error) {
    if (InvalidArgumentError.isInstance(error)) return error.field;
    throw error;
  }
  throw new Error("expected an InvalidArgumentError, but the call succeeded");
}

const T = 1731500000.123456;
const rollout0 = { rollout_id: "ro-0123456789ab", input: { q: 1 }, start_time: T };
const attempt0 = { rollout_id: "ro-0123456789ab", attempt_id: "at-01234567", sequence_id: 1, start_time: T };
const span0 = {
  rollout_id: "ro-0123456789ab",
  attempt_id: "at-01234567",
  sequence_id: 1,
  trace_id: "0".repeat(32),
  span_id: "1".repeat(16),
  name: "openai.chat.completion",
};

describe("schemas name the offending field", () => {
  const path = (schema: Parameters<typeof parseOrThrow>[0], value: unknown) =>
    fieldOf(() => parseOrThrow(schema, value));

  it("RolloutConfig and EnqueueRolloutRequest", () => {
    expect(path(RolloutConfigSchema, { max_attempts: 0 })).toBe("max_attempts");
    expect(path(RolloutConfigSchema, { timeout_seconds: -1 })).toBe("timeout_seconds");
    expect(path(RolloutConfigSchema, { retry_condition: ["timeout", "bogus"] })).toBe("retry_condition[1]");
    expect(path(EnqueueRolloutRequestSchema, { input: 1, mode: "prod" })).toBe("mode");
    expect(path(EnqueueRolloutRequestSchema, { input: 1, config: { max_attempts: 1.5 } })).toBe(
      "config.max_attempts",
    );
    expect(path(EnqueueRolloutRequestSchema, { input: 1, metadata: [] })).toBe("metadata");
  });

  it("Rollout, Attempt and AttemptedRollout", () => {
    expect(path(RolloutSchema, { ...rollout0, rollout_id: "" })).toBe("rollout_id");
    expect(path(RolloutSchema, { ...rollout0, start_time: "now" })).toBe("start_time");
    expect(path(RolloutSchema, { ...rollout0, status: "done" })).toBe("status");
    expect(path(RolloutSchema, { ...rollout0, config: { unresponsive_seconds: 0 } })).toBe(
      "config.unresponsive_seconds",
    );
    expect(path(AttemptSchema, { ...attempt0, sequence_id: 0 })).toBe("sequence_id");
    expect(path(AttemptSchema, { ...attempt0, status: "queuing" })).toBe("status");
    expect(path(AttemptSchema, { ...attempt0, last_heartbeat_time: Number.POSITIVE_INFINITY })).toBe(
      "last_heartbeat_time",
    );
    expect(
      path(AttemptedRolloutSchema, { ...rollout0, attempt: { ...attempt0, rollout_id: "ro-other" } }),
    ).toBe("attempt.rollout_id");
    expect(path(AttemptedRolloutSchema, { ...rollout0, attempt: { ...attempt0, attempt_id: 3 } })).toBe(
      "attempt.attempt_id",
    );
  });

  it("Span", () => {
    expect(path(SpanSchema, { ...span0, sequence_id: 1.5 })).toBe("sequence_id");
    expect(path(SpanSchema, { ...span0, name: undefined })).toBe("name");
    expect(path(SpanSchema, { ...span0, status: { status_code: "BAD" } })).toBe("status.status_code");
    expect(path(SpanSchema, { ...span0, events: [{ name: "e" }, { attributes: {} }] })).toBe(
      "events[1].name",
    );
    expect(path(SpanSchema, { ...span0, links: [{ context: { trace_id: "t" } }] })).toBe(
      "links[0].context.span_id",
    );
    expect(path(SpanSchema, { ...span0, resource: { schema_url: 5 } })).toBe("resource.schema_url");
  });

  it("resources: the union on resource_type, NamedResources and ResourcesUpdate", () => {
    expect(path(ResourceSchema, { resource_type: "vllm", endpoint: "e", model: "m" })).toBe("resource_type");
    expect(path(ResourceSchema, { endpoint: "e", model: "m" })).toBe("resource_type");
    expect(path(ResourceSchema, { resource_type: "proxy_llm", endpoint: "e" })).toBe("model");
    expect(
      path(ResourceSchema, { resource_type: "prompt_template", template: "t", engine: "mustache" }),
    ).toBe("engine");
    expect(path(NamedResourcesSchema, { main: { resource_type: "llm", model: "m" } })).toBe("main.endpoint");
    const update = { resources_id: "rs-1", resources: {}, create_time: T, update_time: T, version: 1 };
    expect(path(ResourcesUpdateSchema, { ...update, version: 0 })).toBe("version");
    expect(path(ResourcesUpdateSchema, { ...update, update_time: undefined })).toBe("update_time");
    expect(
      path(ResourcesUpdateSchema, { ...update, resources: { p: { resource_type: "prompt_template" } } }),
    ).toBe("resources.p.template");
  });

  it("Triplet and Worker", () => {
    expect(path(TripletSchema, { prompt: {}, response: {}, reward: "1" })).toBe("reward");
    expect(path(TripletSchema, { prompt: {}, response: {}, metadata: 3 })).toBe("metadata");
    expect(path(WorkerSchema, { worker_id: "w", status: "sleeping" })).toBe("status");
    expect(path(WorkerSchema, { worker_id: "" })).toBe("worker_id");
    expect(path(WorkerSchema, { worker_id: "w", current_rollout_id: 1 })).toBe("current_rollout_id");
  });
});

describe("public constructors and factories name the offending field", () => {
  const store = new InMemoryLightningStore({ watchdog: false });
  const agent = async () => 1;

  it("resource factories", () => {
    expect(fieldOf(() => llm({ endpoint: "", model: "m" }))).toBe("llm.endpoint");
    expect(fieldOf(() => llm({ endpoint: "e", model: "m", api_key: 5 as any }))).toBe("llm.api_key");
    expect(fieldOf(() => proxyLLM({ endpoint: "e" } as any))).toBe("proxy_llm.model");
    expect(fieldOf(() => proxyLLM({ endpoint: "e", model: "m", sampling_parameters: [] as any }))).toBe(
      "proxy_llm.sampling_parameters",
    );
    expect(fieldOf(() => promptTemplate(5 as any))).toBe("prompt_template.template");
    expect(fieldOf(() => promptTemplate("t", "mustache" as any))).toBe("prompt_template.engine");
  });

  it("Runner, Trainer, Baseline, LightningTracer and the in-memory store", () => {
    expect(fieldOf(() => new Runner({} as any))).toBe("runner.store");
    expect(fieldOf(() => new Runner({ store, agent: 5 as any }))).toBe("runner.agent");
    expect(fieldOf(() => new Runner({ store, agent, concurrency: 0 }))).toBe("runner.concurrency");
    expect(fieldOf(() => new Runner({ store, agent, pollIntervalMs: -1 }))).toBe("runner.pollIntervalMs");
    expect(fieldOf(() => new Runner({ store, agent, proxyTokenSecret: "short" }))).toBe(
      "runner.proxyTokenSecret",
    );
    expect(fieldOf(() => new Runner({ store, agent, concurrenc: 2 } as any))).toBe("runner.concurrenc");
    expect(fieldOf(() => new Runner(null as any))).toBe("runner");
    expect(fieldOf(() => new Trainer({ runnerConcurrency: 1.5 }))).toBe("trainer.runnerConcurrency");
    expect(fieldOf(() => new Trainer({ heartbeatIntervalSeconds: 0 }))).toBe(
      "trainer.heartbeatIntervalSeconds",
    );
    expect(fieldOf(() => new Trainer({ logger: {} as any }))).toBe("trainer.logger");
    expect(fieldOf(() => new Trainer([] as any))).toBe("trainer");
    expect(fieldOf(() => new Baseline({ rolloutConfig: { max_attempts: 0 } }))).toBe(
      "baseline.rolloutConfig.max_attempts",
    );
    expect(fieldOf(() => new LightningTracer({ name: "" }))).toBe("tracer.name");
    expect(fieldOf(() => new InMemoryLightningStore({ watchdog: "yes" } as any))).toBe("options.watchdog");
  });

  it("rollout() and operation()", () => {
    expect(fieldOf(() => rollout(5 as any))).toBe("fn");
    expect(fieldOf(() => rollout(undefined as any))).toBe("fn");
    expect(fieldOf(() => rollout(agent, "name" as any))).toBe("options");
    expect(fieldOf(() => rollout(agent, { name: 3 as any }))).toBe("options.name");
    expect(rollout(agent, { name: "mine" }).agentName).toBe("mine");
    expect(fieldOf(() => operation(5 as any))).toBe("fn");
    expect(fieldOf(() => operation("step", 5 as any))).toBe("body");
    expect(fieldOf(() => operation("", () => 1))).toBe("name");
    expect(fieldOf(() => operation(agent, { name: 1 as any }))).toBe("options.name");
    expect(fieldOf(() => operation("step", () => 1, { input: [1] as any }))).toBe("options.input");
    expect(fieldOf(() => operation(agent, { tracer: {} as any }))).toBe("options.tracer");
  });

  it("startMockLLMServer", async () => {
    expect(await fieldOfAsync(() => startMockLLMServer({ port: 70000 }))).toBe("mockLLMServer.port");
    expect(await fieldOfAsync(() => startMockLLMServer({ delayMs: "10" as any }))).toBe(
      "mockLLMServer.delayMs",
    );
    expect(await fieldOfAsync(() => startMockLLMServer({ models: [] }))).toBe("mockLLMServer.models");
    expect(await fieldOfAsync(() => startMockLLMServer({ respond: "echo" as any }))).toBe(
      "mockLLMServer.respond",
    );
    expect(await fieldOfAsync(() => startMockLLMServer({ failFirst: -1 }))).toBe("mockLLMServer.failFirst");
    expect(await fieldOfAsync(() => startMockLLMServer({ delay: 5 } as any))).toBe("mockLLMServer.delay");
  });
});

describe("v0.3 wire format round trip", () => {
  // As a v0.3 server sends them: snake_case, every field present (nulls included), epoch-second floats,
  // fields in declaration order, and a span carrying keys this port does not know.
  const wire = {
    rollout: `{"rollout_id":"ro-0123456789ab","input":{"question":"2+2?","answer":"4"},"start_time":1731500000.123456,"end_time":null,"mode":"train","resources_id":"rs-0123456789ab","status":"running","config":{"timeout_seconds":120.5,"unresponsive_seconds":null,"max_attempts":3,"retry_condition":["timeout","unresponsive"]},"metadata":{}}`,
    attempt: `{"rollout_id":"ro-0123456789ab","attempt_id":"at-01234567","sequence_id":2,"start_time":1731500001.5,"end_time":1731500009.75,"status":"succeeded","worker_id":"Worker-0","last_heartbeat_time":1731500009.000001,"metadata":null}`,
    span: `{"rollout_id":"ro-0123456789ab","attempt_id":"at-01234567","sequence_id":7,"trace_id":"4bf92f3577b34da6a3ce929d0e0e4736","span_id":"00f067aa0ba902b7","parent_id":null,"name":"openai.chat.completion","status":{"status_code":"OK","description":null},"attributes":{"gen_ai.request.model":"m","prompt_token_ids":[1,2,3],"gen_ai.usage.prompt_tokens":3},"events":[{"name":"e","attributes":{},"timestamp":1731500002.25}],"links":[],"start_time":1731500002.000123,"end_time":1731500002.999877,"context":{"trace_id":"4bf92f3577b34da6a3ce929d0e0e4736","span_id":"00f067aa0ba902b7","is_remote":false,"trace_state":{}},"parent":null,"resource":{"attributes":{"agentlightning.rollout_id":"ro-0123456789ab"},"schema_url":""},"dropped_attributes_count":0,"instrumentation_scope":{"name":"agentlightning","version":"0.3.0"}}`,
  };

  it("parses and re-serialises a rollout, an attempt and a span byte for byte", () => {
    for (const [schema, text] of [
      [RolloutSchema, wire.rollout],
      [AttemptSchema, wire.attempt],
      [SpanSchema, wire.span],
    ] as const) {
      expect(JSON.stringify(parseOrThrow(schema, JSON.parse(text)))).toBe(text);
    }
    const attempted = { ...JSON.parse(wire.rollout), attempt: JSON.parse(wire.attempt) };
    expect(parseOrThrow(AttemptedRolloutSchema, attempted)).toEqual(attempted);
  });

  it("keeps unknown span keys and float times through the in-memory store", async () => {
    const store = new InMemoryLightningStore({ watchdog: false });
    const started = await store.startRollout({ input: 1 });
    const span = {
      ...JSON.parse(wire.span),
      rollout_id: started.rollout_id,
      attempt_id: started.attempt.attempt_id,
    };
    await store.addSpan(span);
    const [stored] = (await store.querySpans(started.rollout_id)).items;
    expect(JSON.stringify(stored)).toBe(JSON.stringify(span));
    await store.close();
  });
});
