import type { Logger } from './ports/logger.js';

const noop = (): void => {};

/** A logger that drops everything (the default). */
export const silentLogger: Logger = { debug: noop, info: noop, warn: noop, error: noop, child: () => silentLogger };

/**
 * What a log call puts under `err`: always an Error (pino's `err` serializer, and the JSON logger below, then record
 * its type, message and stack); anything else that was thrown is wrapped.
 */
export function asError(err: unknown): Error {
  return err instanceof Error ? err : new Error(typeof err === 'string' ? err : String(err));
}

/** Errors as pino's standard serializer writes them (JSON.stringify alone would write `{}`). */
function serializeErrors(_key: string, value: unknown): unknown {
  if (!(value instanceof Error)) return value;
  const out: Record<string, unknown> = { type: value.name, message: value.message, stack: value.stack };
  const code = (value as { code?: unknown }).code;
  if (code !== undefined) out.code = code;
  if (value.cause !== undefined) out.cause = value.cause;
  return out;
}

export type LogLevel = 'debug' | 'info' | 'warn' | 'error';
const LEVELS: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40 };

/**
 * A small JSON-lines logger (one object per line), for hosts without pino.
 * @example const logger = createJsonLogger({ level: 'info' });
 */
export function createJsonLogger(
  options: { level?: LogLevel; write?: (line: string) => void; bindings?: Record<string, unknown> } = {},
): Logger {
  const min = LEVELS[options.level ?? 'info'];
  const write = options.write ?? ((line: string) => process.stdout.write(line + '\n'));
  const bindings = options.bindings ?? {};
  const at =
    (level: LogLevel) =>
    (obj: Record<string, unknown>, msg?: string): void => {
      if (LEVELS[level] < min) return;
      write(JSON.stringify({ time: new Date().toISOString(), level, ...bindings, ...obj, ...(msg ? { msg } : {}) }, serializeErrors));
    };
  return {
    debug: at('debug'),
    info: at('info'),
    warn: at('warn'),
    error: at('error'),
    child: (more) => createJsonLogger({ ...options, bindings: { ...bindings, ...more } }),
  };
}

export function childLogger(logger: Logger, bindings: Record<string, unknown>): Logger {
  return logger.child ? logger.child(bindings) : logger;
}
