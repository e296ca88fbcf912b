import { describe, expect, it } from "vitest";
import { attemptError } from "./attempt-error.js";

describe("attemptError", () => {
  it("reads what agl runners record: type, message, stack and the field an argument error names", () => {
    expect(
      attemptError({
        metadata: {
          error: {
            type: "InvalidArgumentError",
            message: "environment variable OPENAI_API_KEY is not set on this worker",
            stack: "InvalidArgumentError: ...\n    at withEnvApiKey",
            field: "resources.main_llm.api_key_env",
          },
        },
      }),
    ).toEqual({
      type: "InvalidArgumentError",
      message: "environment variable OPENAI_API_KEY is not set on this worker",
      field: "resources.main_llm.api_key_env",
      stack: "InvalidArgumentError: ...\n    at withEnvApiKey",
    });
  });

  it("a runner stopped before the agent returned (no spans, no stack)", () => {
    expect(
      attemptError({
        metadata: {
          error: { type: "RunnerStopped", message: "runner W stopped before the rollout finished" },
        },
      }),
    ).toMatchObject({ type: "RunnerStopped", stack: null, field: null });
  });

  it("other writers' shapes: a bare string, a Python traceback, unknown keys; none when there is no error", () => {
    expect(attemptError({ metadata: { error: "boom" } })).toMatchObject({ type: "Error", message: "boom" });
    expect(
      attemptError({ metadata: { error: { name: "ValueError", error: "bad", traceback: "Traceback ..." } } }),
    ).toEqual({ type: "ValueError", message: "bad", field: null, stack: "Traceback ..." });
    expect(attemptError({ metadata: { error: { code: 7 } } })).toMatchObject({ message: '{"code":7}' });
    expect(attemptError({ metadata: {} })).toBeNull();
    expect(attemptError({ metadata: null } as never)).toBeNull();
  });
});
