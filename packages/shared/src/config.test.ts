import { describe, expect, it } from "vitest";
import { z } from "zod";
import { BaseServiceEnv, ConfigError, DEFAULT_DATABASE_URL, DEFAULT_NATS_URL, parseConfig } from "./config.ts";

describe("parseConfig", () => {
  it("development: the local database and broker are the defaults", () => {
    const config = parseConfig(BaseServiceEnv, {});
    expect(config.DATABASE_URL).toBe(DEFAULT_DATABASE_URL);
    expect(config.NATS_URL).toBe(DEFAULT_NATS_URL);
  });

  it("production: a missing database or broker address fails at boot, naming each", () => {
    const error = (() => {
      try {
        parseConfig(BaseServiceEnv, { NODE_ENV: "production", LOG_LEVEL: "loud" });
      } catch (err) {
        return err;
      }
    })();
    expect(error).toBeInstanceOf(ConfigError);
    const message = (error as Error).message;
    expect(message).toMatch(/DATABASE_URL: required when NODE_ENV=production/);
    expect(message).toMatch(/NATS_URL: required when NODE_ENV=production/);
    // The other problems are listed too, in the same error.
    expect(message).toMatch(/LOG_LEVEL/);
  });

  it("production: explicit settings (or a service's own database URL) pass; an empty value counts as unset", () => {
    const env = { NODE_ENV: "production", DATABASE_URL: "postgresql://db/x", NATS_URL: "nats://broker:4222" };
    expect(parseConfig(BaseServiceEnv, env).DATABASE_URL).toBe("postgresql://db/x");
    expect(() => parseConfig(BaseServiceEnv, { NODE_ENV: "production", CATALOG_DATABASE_URL: "postgresql://db/c", NATS_URL: "nats://b" })).not.toThrow();
    expect(() => parseConfig(BaseServiceEnv, { ...env, NATS_URL: "" })).toThrow(/NATS_URL: required/);
  });

  it("production requires only what the process reads", () => {
    const OnlyLogs = z.object({ LOG_LEVEL: z.string().default("info") });
    expect(parseConfig(OnlyLogs, { NODE_ENV: "production" })).toEqual({ LOG_LEVEL: "info" });
  });
});
