import { pino, type Logger, type LoggerOptions } from "pino";

export type { Logger };

/** One pino logger per process; children carry request_id (and trace ids). */
export function createLogger(service: string, level: string, options: LoggerOptions = {}): Logger {
  return pino({ name: service, level, base: { service }, ...options });
}
