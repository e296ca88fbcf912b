import { createHmac, randomBytes, timingSafeEqual } from "node:crypto";
import { InvalidArgumentError } from "../errors.js";

/** What a per-attempt token allows: LLM calls (and session reads) for exactly this rollout attempt. */
export interface AttemptClaims {
  rolloutId: string;
  attemptId: string;
  /** Expiry, epoch seconds; null = never. */
  expiresAt: number | null;
}

const PREFIX = "agl1";
/** Below this an HMAC key is guessable offline from one captured token. */
export const MIN_TOKEN_SECRET_BYTES = 16;
/** Lifetime of a scoped token minted without an explicit TTL (24 h): a leaked token cannot live forever. */
export const DEFAULT_SCOPED_TOKEN_TTL_SECONDS = 24 * 60 * 60;

/** A fresh random secret, as a string so it can travel through options, env vars and CLI flags. */
export function generateTokenSecret(): string {
  return randomBytes(32).toString("base64url");
}

/**
 * The per-attempt token format shared by the LLM proxy (which verifies) and runners (which mint):
 * `agl1.<base64url({r,a,e})>.<base64url(hmac-sha256)>`. It lives in core so a runner can mint tokens for a
 * proxy it never imports; stateless so any process holding the secret can mint or verify, and nothing is
 * stored per attempt.
 */
export class ScopedTokenSigner {
  private readonly key: Buffer;

  constructor(secret: string | Buffer) {
    if (typeof secret !== "string" && !Buffer.isBuffer(secret)) {
      throw new InvalidArgumentError("secret", "must be a string or a Buffer");
    }
    this.key = Buffer.from(secret);
    if (this.key.length < MIN_TOKEN_SECRET_BYTES) {
      throw new InvalidArgumentError("secret", `must be at least ${MIN_TOKEN_SECRET_BYTES} bytes`);
    }
  }

  /**
   * A token for one attempt, valid for `ttlSeconds` (default {@link DEFAULT_SCOPED_TOKEN_TTL_SECONDS});
   * an explicit null makes a token that never expires.
   */
  mint(rolloutId: string, attemptId: string, options: { ttlSeconds?: number | null } = {}): string {
    if (typeof rolloutId !== "string" || rolloutId === "") {
      throw new InvalidArgumentError("rolloutId", "must be a non-empty string");
    }
    if (typeof attemptId !== "string" || attemptId === "") {
      throw new InvalidArgumentError("attemptId", "must be a non-empty string");
    }
    const ttl = options.ttlSeconds === undefined ? DEFAULT_SCOPED_TOKEN_TTL_SECONDS : options.ttlSeconds;
    if (ttl !== null && !Number.isFinite(ttl)) {
      throw new InvalidArgumentError("ttlSeconds", "must be a finite number or null");
    }
    const expiresAt = ttl === null ? null : Math.floor(Date.now() / 1000) + ttl;
    const payload = Buffer.from(JSON.stringify({ r: rolloutId, a: attemptId, e: expiresAt })).toString(
      "base64url",
    );
    return `${PREFIX}.${payload}.${this.sign(payload)}`;
  }

  /**
   * The claims of a token with a valid signature, expired or not (callers that cache decode once and
   * check expiry on every use); null for anything else, including tokens of another format.
   */
  decode(token: string): AttemptClaims | null {
    if (typeof token !== "string" || !token.startsWith(`${PREFIX}.`)) return null;
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

  /** The claims of a valid, unexpired token; null otherwise. */
  verify(token: string): AttemptClaims | null {
    const claims = this.decode(token);
    return claims && !isExpired(claims) ? claims : null;
  }

  private sign(payload: string): string {
    return createHmac("sha256", this.key).update(payload).digest("base64url");
  }
}

export function isExpired(claims: AttemptClaims, nowMs = Date.now()): boolean {
  return claims.expiresAt !== null && claims.expiresAt * 1000 < nowMs;
}
