/**
 * Secrets out of text that may be logged or served: the password of `scheme://user:password@host`
 * URIs (a PostgreSQL --store URI, a backend URL with basic auth) and the values of query parameters
 * named like credentials (`api_key=`, `token=`...). Everything else is kept, so the text stays useful.
 */
const USERINFO = /\b([a-z][a-z0-9+.-]*:\/\/)([^/?#@\s:]*):([^/?#@\s]*)@/gi;
const SECRET_PARAM =
  /([?&;](?:api[_-]?key|key|token|access[_-]?token|auth|password|passwd|pwd|secret|client[_-]?secret|sig|signature)=)[^&;#\s"']*/gi;

export function redactSecrets(text: string): string {
  if (!text.includes("@") && !text.includes("=")) return text;
  return text.replace(USERINFO, "$1$2:***@").replace(SECRET_PARAM, "$1***");
}
