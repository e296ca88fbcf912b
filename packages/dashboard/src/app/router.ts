import { useEffect, useState } from "preact/hooks";

export interface Route {
  /** Path segments after "#/", e.g. ["rollouts", "ro-123"]. */
  parts: string[];
  params: URLSearchParams;
}

function parse(hash: string): Route {
  const [path = "", query = ""] = hash.replace(/^#\/?/, "").split("?");
  const parts = path.split("/").filter(Boolean).map(decodeURIComponent);
  return { parts: parts.length ? parts : ["rollouts"], params: new URLSearchParams(query) };
}

export function useRoute(): Route {
  const [route, setRoute] = useState(() => parse(location.hash));
  useEffect(() => {
    const onChange = () => setRoute(parse(location.hash));
    addEventListener("hashchange", onChange);
    return () => removeEventListener("hashchange", onChange);
  }, []);
  return route;
}

export function href(parts: string[], params?: Record<string, string | number | undefined | null>): string {
  const query = new URLSearchParams();
  for (const [k, v] of Object.entries(params ?? {})) {
    if (v !== undefined && v !== null && v !== "") query.set(k, String(v));
  }
  const q = query.toString();
  return `#/${parts.map(encodeURIComponent).join("/")}${q ? `?${q}` : ""}`;
}

export function navigate(parts: string[], params?: Record<string, string | number | undefined | null>): void {
  location.hash = href(parts, params);
}
