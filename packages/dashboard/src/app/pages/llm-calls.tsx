import { formatDuration, formatReward } from "../../view/format.js";
import { type LlmCallView, messageDisplay, messageText } from "../../view/llm-calls.js";
import { EmptyState } from "../components.js";

const DROP_REASONS: Record<string, string> = {
  unreadable: "the span matched the LLM-call pattern but its attributes could not be read",
  under_reward: "the call was made inside a reward span (a grader), so it is not trained on",
  outside_agent: "the call is outside the agent selected by agentMatch",
  duplicate_response_id: "another span already recorded this response id",
  nested_llm_call: "the call is nested inside another LLM call",
  missing_token_ids: "no prompt/response token ids were recorded (route the agent through the proxy)",
};

export function LlmCalls({ calls }: { calls: LlmCallView[] }) {
  if (calls.length === 0) {
    return (
      <EmptyState testId="state-no-calls" title="No LLM call in these spans">
        No span looks like an LLM call. Instrument the agent's client or route it through the agl proxy.
      </EmptyState>
    );
  }
  return (
    <div data-testid="llm-calls">
      {calls.map((call, i) => (
        <article key={call.spanId} class="call" data-testid="llm-call">
          <header>
            <strong>call {i + 1}</strong> <span class="mono">{call.model ?? "unknown model"}</span> ·{" "}
            <span data-testid="call-tokens">
              {call.promptTokens ?? "?"} prompt / {call.completionTokens ?? "?"} completion tokens
            </span>{" "}
            · {formatDuration(call.latencySeconds)} · {call.finishReason ?? "no finish reason"} ·{" "}
            {call.kept ? (
              <span class="badge status-succeeded">triplet</span>
            ) : (
              <span
                class="badge status-failed"
                title={DROP_REASONS[call.dropReason ?? ""] ?? ""}
                data-testid="dropped"
              >
                dropped: {call.dropReason}
              </span>
            )}
            {call.reward !== null && <span class="badge reward">reward {formatReward(call.reward)}</span>}
          </header>
          {!call.kept && call.dropReason && <p class="note">{DROP_REASONS[call.dropReason]}</p>}
          <div class="messages">
            {call.input.map((m, j) => (
              <Message key={`in-${j}`} role={m.role} text={messageDisplay(m)} />
            ))}
            {call.output.map((m, j) => (
              <Message key={`out-${j}`} role={`${m.role} (output)`} text={messageText(m)} output />
            ))}
          </div>
          {call.toolCalls.length > 0 && (
            <ul class="tool-calls" data-testid="tool-calls">
              {call.toolCalls.map((t, j) => (
                <li key={j} class="mono">
                  {t.function.name}({t.function.arguments})
                </li>
              ))}
            </ul>
          )}
        </article>
      ))}
    </div>
  );
}

function Message({ role, text, output }: { role: string; text: string; output?: boolean }) {
  return (
    <div class={`msg ${output ? "out" : ""}`} data-testid="message">
      <span class="role">{role}</span>
      <pre>{text}</pre>
    </div>
  );
}
