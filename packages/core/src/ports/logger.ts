/**
 * Structured logger. Compatible with pino's `(object, message)` call shape, so a host can pass its pino logger
 * (or a child of it) as is. genservice puts errors under `err`, always as Error objects, so pino's standard `err`
 * serializer records their type, message and stack.
 */
export interface Logger {
  debug(obj: Record<string, unknown>, msg?: string): void;
  info(obj: Record<string, unknown>, msg?: string): void;
  warn(obj: Record<string, unknown>, msg?: string): void;
  error(obj: Record<string, unknown>, msg?: string): void;
  child?(bindings: Record<string, unknown>): Logger;
}
