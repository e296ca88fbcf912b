import { StoreApi } from "../view/api.js";

const TOKEN_KEY = "agl-dashboard-token";

/** The bearer token lives in sessionStorage: it survives reloads but not closing the tab. */
export const session = {
  token(): string | null {
    try {
      return sessionStorage.getItem(TOKEN_KEY);
    } catch {
      return null;
    }
  },
  setToken(token: string | null): void {
    if (token) sessionStorage.setItem(TOKEN_KEY, token);
    else sessionStorage.removeItem(TOKEN_KEY);
  },
};

/** The page is served next to the store API (by agl-store, or by agl-dashboard's forwarding server). */
export const api = new StoreApi({ baseUrl: "", token: () => session.token() });

/** GET a file served beside the page (the metrics log), with the same bearer token. */
export async function fetchBeside(path: string): Promise<Response> {
  const token = session.token();
  return fetch(new URL(path, document.baseURI), {
    headers: token ? { authorization: `Bearer ${token}` } : {},
    signal: AbortSignal.timeout(15_000),
  });
}
