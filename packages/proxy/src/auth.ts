import type { IncomingHttpHeaders } from "node:http";
import { credentialOf, ScopedTokenIssuer, safeEqual } from "./scoped-tokens.js";

export type Principal =
  | { kind: "admin" }
  | { kind: "attempt"; rolloutId: string; attemptId: string }
  | { kind: "anonymous" };

export class AuthError extends Error {
  constructor(
    readonly status: 400 | 401 | 403,
    message: string,
  ) {
    super(message);
    this.name = "AuthError";
  }
}

/**
 * Who is calling. The admin token (trainer, operators) may do anything; a per-attempt token only that
 * attempt's LLM calls and session reads; with `llmAuth: "none"` anonymous callers may make LLM calls.
 */
export class Authenticator {
  readonly tokens: ScopedTokenIssuer;

  constructor(
    private readonly adminToken: string | null,
    private readonly llmAuth: "none" | "token",
    tokenSecret?: string,
  ) {
    this.tokens = new ScopedTokenIssuer(tokenSecret);
  }

  identify(headers: IncomingHttpHeaders): Principal {
    const credential = credentialOf(headers);
    if (credential === null) return { kind: "anonymous" };
    if (this.adminToken !== null && safeEqual(credential, this.adminToken)) return { kind: "admin" };
    const claims = this.tokens.verify(credential);
    if (claims) return { kind: "attempt", rolloutId: claims.rolloutId, attemptId: claims.attemptId };
    return { kind: "anonymous" };
  }

  /** The principal for an LLM call; throws 401 when tokens are required and none is valid. */
  llmPrincipal(headers: IncomingHttpHeaders): Principal {
    const p = this.identify(headers);
    if (this.llmAuth === "token" && p.kind === "anonymous") {
      throw new AuthError(401, "Invalid or missing API key");
    }
    return p;
  }

  /** Control routes: the admin token, or open when none is configured. */
  isAdmin(headers: IncomingHttpHeaders): boolean {
    if (this.adminToken === null) return true;
    return this.identify(headers).kind === "admin";
  }
}
