/** Agent names from every framework key `agentNameOf` knows, alone, in precedence, and through TraceToTriplets. */
import type { Attributes } from "@agl/core";
import { describe, expect, it } from "vitest";
import { agentNameOf } from "./conventions.js";
import { llmAttrs, mkSpan } from "./test-helpers.js";
import { TraceToTriplets } from "./trace-to-triplets.js";

const agentSpan = (attributes: Attributes, name = "agent") => mkSpan({ id: "a", name, attributes });

describe("agentNameOf", () => {
  it.each<[string, Attributes, string, string | null]>([
    ["OpenAI Agents agent.name", { "agent.name": "planner" }, "agent", "planner"],
    [
      "AgentOps operation.name with span kind agent",
      { "agentops.span.kind": "agent", "operation.name": "solver" },
      "solver.agent",
      "solver",
    ],
    [
      "AgentOps operation.name on a tool span is not an agent",
      { "agentops.span.kind": "tool", "operation.name": "calculator" },
      "calculator.tool",
      null,
    ],
    ["AutoGen recipient_agent_type", { recipient_agent_type: "coder" }, "autogen process", "coder"],
    ["LangChain langchain.chain.type", { "langchain.chain.type": "AgentExecutor" }, "chain", "AgentExecutor"],
    [
      "Agent Framework executor.id",
      { "executor.id": "writer_executor" },
      "executor.process",
      "writer_executor",
    ],
    [
      "operation() with input.type agent",
      { "agentlightning.operation.input.type": "agent", "agentlightning.operation.input.name": "critic" },
      "agentlightning.operation",
      "critic",
    ],
    [
      "operation() of another type is not an agent",
      { "agentlightning.operation.input.type": "tool", "agentlightning.operation.input.name": "search" },
      "agentlightning.operation",
      null,
    ],
    [
      "lc_name on a langchain.Chain.* span",
      { lc_name: "RunnableSequence" },
      "langchain.Chain.run",
      "RunnableSequence",
    ],
    ["lc_name on any other span is not an agent", { lc_name: "ChatOpenAI" }, "langchain.Llm.run", null],
    ["an empty agent.name is no name", { "agent.name": "" }, "agent", null],
  ])("%s", (_label, attributes, spanName, expected) => {
    expect(agentNameOf(agentSpan(attributes, spanName))).toBe(expected);
  });

  it("reads the keys in order: an empty or non-agent key falls through to the next one", () => {
    const all: Attributes = {
      "agent.name": "openai-agent",
      "agentops.span.kind": "agent",
      "operation.name": "agentops-agent",
      recipient_agent_type: "autogen-agent",
      "langchain.chain.type": "langchain-agent",
      "executor.id": "executor-agent",
    };
    expect(agentNameOf(agentSpan(all))).toBe("openai-agent");
    expect(agentNameOf(agentSpan({ ...all, "agent.name": "" }))).toBe("agentops-agent");
    expect(agentNameOf(agentSpan({ ...all, "agent.name": "", "agentops.span.kind": "llm" }))).toBe(
      "autogen-agent",
    );
    expect(agentNameOf(agentSpan({ "langchain.chain.type": "lc", "executor.id": "ex" }))).toBe("lc");
  });

  it("reads nested (OTLP-ingested) attributes like flat ones", () => {
    expect(agentNameOf(agentSpan({ executor: { id: "nested-executor" } } as unknown as Attributes))).toBe(
      "nested-executor",
    );
  });

  it("names the agent of each triplet, and agentMatch filters on these keys", () => {
    const keys: Array<[string, Attributes, string]> = [
      ["ops", { "agentops.span.kind": "agent", "operation.name": "solver" }, "agent"],
      ["ag", { recipient_agent_type: "coder" }, "autogen"],
      ["lc", { "langchain.chain.type": "AgentExecutor" }, "chain"],
      ["ex", { "executor.id": "writer_executor" }, "executor"],
      ["lcn", { lc_name: "RunnableSequence" }, "langchain.Chain.invoke"],
    ];
    const spans = keys.flatMap(([id, attributes, name], i) => [
      mkSpan({ id, name, start: i * 10, end: i * 10 + 5, attributes }),
      mkSpan({
        id: `${id}-llm`,
        parent: id,
        name: "openai.chat.completion",
        start: i * 10 + 1,
        end: i * 10 + 2,
        attributes: llmAttrs({ responseId: `r-${id}`, promptIds: [1], responseIds: [2] }),
      }),
    ]);
    expect(new TraceToTriplets().adapt(spans).map((t) => t.metadata.agent_name)).toEqual([
      "solver",
      "coder",
      "AgentExecutor",
      "writer_executor",
      "RunnableSequence",
    ]);
    const { output, diagnostics } = new TraceToTriplets({ agentMatch: /_executor$/ }).adaptWithDiagnostics(
      spans,
    );
    expect(output.map((t) => t.metadata.response_id)).toEqual(["r-ex"]);
    expect(diagnostics.counts.llm_call_outside_agent).toBe(4);
  });
});
