import { useEffect, useState } from "preact/hooks";
import { EmptyState } from "./components.js";
import { ResourcesPage } from "./pages/resources.js";
import { RolloutDetailPage } from "./pages/rollout-detail.js";
import { RolloutsPage } from "./pages/rollouts.js";
import { TrainingPage } from "./pages/training.js";
import { WorkersPage } from "./pages/workers.js";
import { href, useRoute } from "./router.js";
import { api, session } from "./session.js";
import { onUnauthorized } from "./use-query.js";

const NAV = [
  ["rollouts", "Rollouts"],
  ["resources", "Resources"],
  ["workers", "Workers"],
  ["training", "Training"],
] as const;

export function App() {
  const route = useRoute();
  const [needsLogin, setNeedsLogin] = useState(false);
  // Remount the pages after sign-in so every query runs again with the token.
  const [generation, setGeneration] = useState(0);
  useEffect(() => onUnauthorized(() => setNeedsLogin(true)), []);

  const [section, id] = route.parts;
  let page = (
    <EmptyState testId="state-unknown-page" title="No such page">
      <a href={href(["rollouts"])}>Go to the rollouts</a>
    </EmptyState>
  );
  if (section === "rollouts" && id)
    page = <RolloutDetailPage rolloutId={id} attemptParam={route.params.get("attempt")} />;
  else if (section === "rollouts") page = <RolloutsPage route={route} />;
  else if (section === "resources") page = <ResourcesPage />;
  else if (section === "workers") page = <WorkersPage />;
  else if (section === "training") page = <TrainingPage />;

  return (
    <>
      <nav class="top">
        <span class="brand">⚡ Agent Lightning</span>
        {NAV.map(([key, label]) => (
          <a key={key} href={href([key])} class={section === key ? "on" : ""} data-testid={`nav-${key}`}>
            {label}
          </a>
        ))}
        <span class="spacer" />
        {session.token() && (
          <button
            type="button"
            class="link"
            onClick={() => {
              session.setToken(null);
              setGeneration((g) => g + 1);
            }}
          >
            sign out
          </button>
        )}
      </nav>
      <main key={generation}>{page}</main>
      {needsLogin && (
        <Login
          onDone={() => {
            setNeedsLogin(false);
            setGeneration((g) => g + 1);
          }}
        />
      )}
    </>
  );
}

/** The store wants a bearer token: ask for it, check it against the store, keep it for this tab. */
function Login({ onDone }: { onDone: () => void }) {
  const [token, setToken] = useState("");
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const submit = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    const previous = session.token();
    session.setToken(token.trim());
    try {
      await api.statistics();
      onDone();
    } catch (err) {
      session.setToken(previous);
      setError((err as Error).message || "sign-in failed");
    } finally {
      setBusy(false);
    }
  };
  return (
    <div class="overlay" data-testid="login">
      <form class="login" onSubmit={submit}>
        <h2>This store needs a token</h2>
        <p>Enter the bearer token the store was started with (--token or AGL_STORE_TOKEN).</p>
        <input
          type="password"
          value={token}
          placeholder="token"
          data-testid="login-token"
          onInput={(e) => setToken((e.target as HTMLInputElement).value)}
        />
        <button type="submit" disabled={busy || !token.trim()} data-testid="login-submit">
          Sign in
        </button>
        {error && (
          <p class="error" data-testid="login-error">
            {error}
          </p>
        )}
      </form>
    </div>
  );
}
