/**
 * Config is one zod schema per process, parsed once at boot: a bad deploy
 * fails at start with every problem listed, never later at first use.
 */
import { z } from "zod";
import { StreamPrefix } from "./subjects.ts";

export const DEFAULT_DATABASE_URL = "postgresql://postgres@127.0.0.1:5432/whereabouts";
export const DEFAULT_NATS_URL = "nats://127.0.0.1:4222";

export const LogLevel = z.enum(["fatal", "error", "warn", "info", "debug", "trace", "silent"]).default("info");

/** The ops server's port (/healthz, /readyz, /metrics); 0 picks a free one (tests). */
export const DEFAULT_OPS_PORT = 9464;
export const OpsPort = z.coerce.number().int().min(0).max(65535).default(DEFAULT_OPS_PORT);

/** The variables every service reads; each service extends this. */
export const BaseServiceEnv = z.object({
  NATS_URL: z.string().min(1).default(DEFAULT_NATS_URL),
  DATABASE_URL: z.string().min(1).default(DEFAULT_DATABASE_URL),
  LOG_LEVEL: LogLevel,
  RPC_TIMEOUT_MS: z.coerce.number().int().positive().default(5000),
  /** Credentials of the services' NATS user, when the broker requires them. */
  NATS_USER: z.string().min(1).optional(),
  NATS_PASSWORD: z.string().min(1).optional(),
  /** The stack's namespace on a shared broker (subjects.ts reads it). */
  STREAM_PREFIX: StreamPrefix,
  /** Replicas of each JetStream stream: 3 on a clustered broker. */
  NATS_STREAM_REPLICAS: z.coerce.number().int().min(1).max(5).default(1),
  OPS_PORT: OpsPort,
});

export class ConfigError extends Error {
  override readonly name = "ConfigError";
}

export function parseConfig<S extends z.ZodType>(schema: S, env: Record<string, string | undefined> = process.env): z.output<S> {
  // Empty strings mean "unset", as most deploy tools render missing values.
  const cleaned = Object.fromEntries(Object.entries(env).filter(([, v]) => v !== undefined && v !== ""));
  const result = schema.safeParse(cleaned);
  if (!result.success) {
    const lines = result.error.issues.map((i) => `${i.path.join(".") || "(env)"}: ${i.message}`);
    throw new ConfigError(`Invalid configuration:\n  ${lines.join("\n  ")}`);
  }
  return result.data;
}

/** `<SERVICE>_DATABASE_URL` overrides the shared DATABASE_URL. */
export function serviceDatabaseUrl(service: string, env: Record<string, string | undefined> = process.env): string {
  return env[`${service.toUpperCase()}_DATABASE_URL`] || env.DATABASE_URL || DEFAULT_DATABASE_URL;
}
