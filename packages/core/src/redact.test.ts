import { describe, expect, it } from "vitest";
import { redactSecrets } from "./redact.js";

describe("redactSecrets", () => {
  it("hides URI passwords and credential-like query values, keeps the rest", () => {
    expect(redactSecrets("postgres://agl:s3cr%40t@db:5432/agl?sslmode=require")).toBe(
      "postgres://agl:***@db:5432/agl?sslmode=require",
    );
    expect(redactSecrets("recording into postgresql://u:p@h/db (schema x)")).toBe(
      "recording into postgresql://u:***@h/db (schema x)",
    );
    expect(redactSecrets("http://h:1/v1?api_key=abc&model=m&token=t")).toBe(
      "http://h:1/v1?api_key=***&model=m&token=***",
    );
    expect(redactSecrets("http://user@h/v1")).toBe("http://user@h/v1");
    expect(redactSecrets("sqlite:/tmp/a.db")).toBe("sqlite:/tmp/a.db");
    expect(redactSecrets("memory:")).toBe("memory:");
  });
});
