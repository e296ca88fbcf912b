import { createHmac, randomBytes, timingSafeEqual } from "node:crypto";

/** What a per-attempt token allows: LLM calls (and session reads) for exactly this rollout attempt. */
export interface AttemptClaims {
  rolloutId: string;
  attemptId: string;
  /** Expiry, epoch seconds; null = never. */
  expiresAt: number | null;
}

const PREFIX = "agl1";

/**
 * Stateless HMAC tokens: `agl1.<base64url({r,a,e})>.<base64url(hmac-sha256)>`. Stateless so several
 * proxy processes sharing one secret accept each other's tokens and nothing has to be stored per attempt.
 */
export class ScopedTokenIssuer {
  private readonly secret: Buffer;
  /** Verification is on every request; a small cache keeps it off the hot path. */
  private readonly cache = new Map<string, AttemptClaims | null>();
  private static readonly CACHE_LIMIT = 10_000;

  constructor(secret?: string | Buffer) {
    this.secret = secret === undefined ? randomBytes(32) : Buffer.from(secret);
    if (this.secret.length < 16) throw new Error("scoped token secret must be at least 16 bytes");
  }

  mint(rolloutId: string, attemptId: string, options: { ttlSeconds?: number | null } = {}): string {
    const ttl = options.ttlSeconds ?? null;
    const expiresAt = ttl === null ? null : Math.floor(Date.now() / 1000) + ttl;
    const payload = Buffer.from(JSON.stringify({ r: rolloutId, a: attemptId, e: expiresAt })).toString(
      "base64url",
    );
    return `${PREFIX}.${payload}.${this.sign(payload)}`;
  }

  /** The claims of a valid, unexpired token; null for anything else (including admin tokens). */
  verify(token: string): AttemptClaims | null {
    let claims = this.cache.get(token);
    if (claims === undefined) {
      claims = this.decode(token);
      if (this.cache.size >= ScopedTokenIssuer.CACHE_LIMIT) this.cache.clear();
      this.cache.set(token, claims);
    }
    if (claims && claims.expiresAt !== null && claims.expiresAt * 1000 < Date.now()) return null;
    return claims;
  }

  private decode(token: string): AttemptClaims | null {
    if (!token.startsWith(`${PREFIX}.`)) return null;
    const parts = token.split(".");
    if (parts.length !== 3) return null;
    const [, payload, signature] = parts as [string, string, string];
    const expected = Buffer.from(this.sign(payload));
    const given = Buffer.from(signature);
    if (expected.length !== given.length || !timingSafeEqual(expected, given)) return null;
    try {
      const body = JSON.parse(Buffer.from(payload, "base64url").toString("utf8"));
      if (typeof body?.r !== "string" || typeof body?.a !== "string") return null;
      const e = typeof body.e === "number" ? body.e : null;
      return { rolloutId: body.r, attemptId: body.a, expiresAt: e };
    } catch {
      return null;
    }
  }

  private sign(payload: string): string {
    return createHmac("sha256", this.secret).update(payload).digest("base64url");
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
