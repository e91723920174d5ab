import { z } from "zod";
import { DEFAULT_DATABASE_URL, DEFAULT_NATS_URL, LogLevel, OpsPort, parseConfig, StreamPrefix } from "@whereabouts/shared";

export const GatewayEnv = z.object({
  HOST: z.string().default("127.0.0.1"),
  PORT: z.coerce.number().int().min(0).max(65535).default(8080),
  /** The ops server (/healthz, /readyz, /metrics), on every interface. */
  OPS_PORT: OpsPort,
  NATS_URL: z.string().min(1).default(DEFAULT_NATS_URL),
  NATS_USER: z.string().min(1).optional(),
  NATS_PASSWORD: z.string().min(1).optional(),
  /** The stack's namespace on a shared broker (subjects.ts reads it). */
  STREAM_PREFIX: StreamPrefix,
  /** Replicas of the DEPLOYMENT stream, should the gateway be first to create it. */
  NATS_STREAM_REPLICAS: z.coerce.number().int().min(1).max(5).default(1),
  DATABASE_URL: z.string().min(1).default(DEFAULT_DATABASE_URL),
  /** The identity schema's own URL, when it lives elsewhere. */
  GATEWAY_DATABASE_URL: z.string().min(1).optional(),
  LOG_LEVEL: LogLevel,
  RATE_LIMIT_MAX: z.coerce.number().int().positive().default(1200),
  RATE_LIMIT_WINDOW_MS: z.coerce.number().int().positive().default(60_000),
  /** When set, rate-limit counts are shared by every gateway replica. */
  REDIS_URL: z.string().min(1).optional(),
  RPC_TIMEOUT_MS: z.coerce.number().int().positive().default(5000),
  READY_TIMEOUT_MS: z.coerce.number().int().positive().default(1000),
  /** Handheld sessions end after this many seconds (EXTENSIONS.md section 1). */
  SESSION_TTL_S: z.coerce.number().int().positive().default(43_200),
  /** `true`: the session cookie is sent over HTTPS only (set it behind TLS). */
  COOKIE_SECURE: z.enum(["true", "false"]).default("false").transform((v) => v === "true"),
});

export type GatewayConfig = z.output<typeof GatewayEnv> & { identityDatabaseUrl: string };

export function loadGatewayConfig(env: Record<string, string | undefined> = process.env): GatewayConfig {
  const parsed = parseConfig(GatewayEnv, env);
  return { ...parsed, identityDatabaseUrl: parsed.GATEWAY_DATABASE_URL ?? parsed.DATABASE_URL };
}
