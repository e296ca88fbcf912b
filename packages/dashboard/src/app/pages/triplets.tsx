import { formatReward } from "../../view/format.js";
import type { RolloutAnalysis } from "../../view/llm-calls.js";
import { countRoles, sequenceTokens, tripletTokens } from "../../view/tokens.js";
import { EmptyState, TokenStrip } from "../components.js";

/** The adapter's output: triplets, trajectory rows with observation masks, and its diagnostics. */
export function Triplets({ analysis }: { analysis: RolloutAnalysis }) {
  const { triplets, sequences, diagnostics, tokenText } = analysis;
  return (
    <div data-testid="triplets">
      {diagnostics.length > 0 && (
        <div class="diagnostics" data-testid="diagnostics">
          <h3>Adapter diagnostics</h3>
          <ul>
            {diagnostics.map((d, i) => (
              <li key={i} class={`sev-${d.severity}`} data-testid="diagnostic" data-code={d.code}>
                <span class="badge">{d.severity}</span> <span class="mono">{d.code}</span> {d.message}
              </li>
            ))}
          </ul>
        </div>
      )}
      {triplets.length === 0 ? (
        <EmptyState testId="state-no-triplets" title="The adapter made no triplet from this attempt">
          See the diagnostics above and the LLM-calls tab for why each call was dropped.
        </EmptyState>
      ) : (
        <>
          <h3>Triplets</h3>
          <p class="note" data-testid="token-text-note">
            {tokenText.size > 0
              ? `Tokens show their text where the spans record it (${tokenText.size} distinct ids); hover a token for its id.`
              : "Tokens show as ids: these spans record no token text (the store has no tokenizer). Text appears when calls record per-token logprobs (logprobs.content), e.g. the proxy with captureBodies or top_logprobs."}
          </p>
          {triplets.map((t, i) => {
            const cells = tripletTokens(t);
            const n = countRoles(cells);
            return (
              <article key={i} class="triplet" data-testid="triplet">
                <header>
                  triplet {i + 1} ·{" "}
                  <span data-testid="triplet-counts">
                    {n.prompt} prompt · {n.response} response tokens
                  </span>{" "}
                  · reward {formatReward(t.reward ?? null)}
                </header>
                <TokenStrip cells={cells} testId="triplet-tokens" text={tokenText} />
              </article>
            );
          })}
          <h3>Training rows (trajectory mode)</h3>
          <p class="legend">
            <span class="tok tok-prompt">prompt</span>{" "}
            <span class="tok tok-response">generated (mask 1)</span>{" "}
            <span class="tok tok-observation">observation (mask 0)</span>
          </p>
          {sequences.map((s, i) => {
            const cells = sequenceTokens(s);
            const n = countRoles(cells);
            return (
              <article key={i} class="triplet" data-testid="sequence">
                <header>
                  row {i + 1} (triplets {s.triplet_indices.map((x) => x + 1).join(", ")}) ·{" "}
                  <span data-testid="sequence-counts">
                    {n.prompt} prompt · {n.response} generated · {n.observation} observation
                  </span>{" "}
                  · reward {formatReward(s.reward)}
                </header>
                <TokenStrip cells={cells} testId="sequence-tokens" text={tokenText} />
              </article>
            );
          })}
        </>
      )}
    </div>
  );
}
