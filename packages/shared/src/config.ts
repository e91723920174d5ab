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

/**
 * Settings whose local default (a database and a broker on this machine) is
 * a convenience of development: with NODE_ENV=production a process that
 * would fall back to it fails at boot instead. A `<SERVICE>_DATABASE_URL`
 * stands in for DATABASE_URL.
 */
export const PRODUCTION_REQUIRED = ["DATABASE_URL", "NATS_URL"] as const;

/** The PRODUCTION_REQUIRED settings `keys` names that production left unset (none outside production). */
export function missingInProduction(keys: readonly string[], env: Record<string, string | undefined>): string[] {
  if (env.NODE_ENV !== "production") return [];
  const set = (name: string) => env[name] !== undefined && env[name] !== "";
  return PRODUCTION_REQUIRED.filter((key) => keys.includes(key)).filter((key) =>
    key === "DATABASE_URL" ? !Object.keys(env).some((name) => /^(?:[A-Z]+_)?DATABASE_URL$/.test(name) && set(name)) : !set(key),
  );
}

export function parseConfig<S extends z.ZodType>(schema: S, env: Record<string, string | undefined> = process.env): z.output<S> {
  // Empty strings mean "unset", as most deploy tools render missing values.
  const cleaned = Object.fromEntries(Object.entries(env).filter(([, v]) => v !== undefined && v !== ""));
  const result = schema.safeParse(cleaned);
  const keys = schema instanceof z.ZodObject ? Object.keys(schema.shape) : [];
  const lines = [
    ...missingInProduction(keys, env).map((key) => `${key}: required when NODE_ENV=production (the local default applies only in development)`),
    ...(result.success ? [] : result.error.issues.map((i) => `${i.path.join(".") || "(env)"}: ${i.message}`)),
  ];
  if (lines.length || !result.success) throw new ConfigError(`Invalid configuration:\n  ${lines.join("\n  ")}`);
  return result.data;
}

/** `<SERVICE>_DATABASE_URL` overrides the shared DATABASE_URL. */
export function serviceDatabaseUrl(service: string, env: Record<string, string | undefined> = process.env): string {
  return env[`${service.toUpperCase()}_DATABASE_URL`] || env.DATABASE_URL || DEFAULT_DATABASE_URL;
}
