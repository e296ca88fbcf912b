import { timingSafeEqual } from "node:crypto";
import { type AttemptClaims, generateTokenSecret, isExpired, ScopedTokenSigner } from "@agl/core";

export type { AttemptClaims };

/**
 * The proxy's side of the per-attempt tokens of `@agl/core` (`ScopedTokenSigner`, format
 * `agl1.<payload>.<sig>`): runners holding the same secret mint them, the proxy verifies them. Adds a
 * cache because verification happens on every request.
 */
export class ScopedTokenIssuer {
  private readonly signer: ScopedTokenSigner;
  /** Signature checks are cached; expiry is still checked on every call. */
  private readonly cache = new Map<string, AttemptClaims | null>();
  private static readonly CACHE_LIMIT = 10_000;

  constructor(secret?: string | Buffer) {
    this.signer = new ScopedTokenSigner(secret ?? generateTokenSecret());
  }

  mint(rolloutId: string, attemptId: string, options: { ttlSeconds?: number | null } = {}): string {
    return this.signer.mint(rolloutId, attemptId, options);
  }

  /** The claims of a valid, unexpired token; null for anything else (including admin tokens). */
  verify(token: string): AttemptClaims | null {
    let claims = this.cache.get(token);
    if (claims === undefined) {
      claims = this.signer.decode(token);
      if (this.cache.size >= ScopedTokenIssuer.CACHE_LIMIT) this.cache.clear();
      this.cache.set(token, claims);
    }
    if (claims && isExpired(claims)) return null;
    return claims;
  }
}

/** Constant-time string comparison for the admin token. */
export function safeEqual(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

/** The credential of a request: `Authorization: Bearer <t>` or `x-api-key: <t>`. */
export function credentialOf(headers: Record<string, string | string[] | undefined>): string | null {
  const auth = headers.authorization;
  if (typeof auth === "string" && auth.length > 7 && auth.slice(0, 7).toLowerCase() === "bearer ") {
    return auth.slice(7).trim();
  }
  const key = headers["x-api-key"];
  return typeof key === "string" && key ? key : null;
}
